"""Crash-safe state files: written atomically (``frame.atomicfile``); read back with a
checksum so a truncated or corrupt file is *detected* (and set aside) instead of half-parsed.

Used for pictures in the gallery, the night's job description, the feed cache and the token. A power
cut at any moment leaves either the old file or the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frame.atomicfile import write_bytes_atomic

log = logging.getLogger(__name__)

# Every state file is small (a job, a picture's record, the feed cache); a bigger one is damage or a
# forgery and is set aside unread, before it can take the daemon's ~45 MiB. The weight cache's kept
# model structure passes its own cap.
MAX_BYTES = 16 << 20


def write_json(path: Path, data: Any, mode: int = 0o644) -> None:
    """Atomic JSON with an embedded SHA-256 of the payload, read back by ``read_json``."""
    payload = json.dumps(data, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(payload.encode()).hexdigest()
    text = json.dumps({"sha256": digest, "data": json.loads(payload)}, ensure_ascii=False)
    write_bytes_atomic(path, text.encode(), mode)


def read_json(path: Path, default: Any = None, max_bytes: int | None = None) -> Any:
    """The data written by ``write_json``, or ``default`` when the file is missing. A damaged file
    (bad JSON, nested past the parser's limit, wrong checksum, truncated, over ``max_bytes``, by
    default ``MAX_BYTES``) is renamed to ``*.corrupt-<time>`` and logged."""
    path = Path(path)
    cap = MAX_BYTES if max_bytes is None else max_bytes
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            raw = file.read(cap + 1) if size <= cap else b""
    except FileNotFoundError:
        return default
    problem = f"{size} bytes, more than a state file's {cap}" if size > cap or len(raw) > cap else _check(raw)
    if problem is None:
        return json.loads(raw)["data"]
    aside = path.with_name(f"{path.name}.corrupt-{datetime.now(UTC):%Y%m%dT%H%M%S}")
    log.error("state file %s is damaged (%s); moved it to %s and carried on without it", path, problem, aside)
    try:
        path.replace(aside)
    except OSError as exc:
        log.error("could not move %s aside: %s", path, exc)
    return default


def _check(raw: bytes) -> str | None:
    try:
        wrapper = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not valid JSON: {exc}"
    except RecursionError:
        return "nested deeper than JSON may be here"
    if not isinstance(wrapper, dict) or set(wrapper) != {"sha256", "data"}:
        return "not a frame state file"
    payload = json.dumps(wrapper["data"], sort_keys=True, ensure_ascii=False)
    if hashlib.sha256(payload.encode()).hexdigest() != wrapper["sha256"]:
        return "checksum mismatch"
    return None
