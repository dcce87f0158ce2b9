"""Crash-safe state files: written atomically (``frame.atomicfile``); read back with a
checksum so a truncated or corrupt file is *detected* (and set aside) instead of half-parsed.

Used for pictures in the gallery, the night's job description, the feed cache and the token. A power
cut at any moment leaves either the old file or the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frame.atomicfile import write_bytes_atomic

log = logging.getLogger(__name__)


def write_json(path: Path, data: Any, mode: int = 0o644) -> None:
    """Atomic JSON with an embedded SHA-256 of the payload, read back by ``read_json``."""
    payload = json.dumps(data, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(payload.encode()).hexdigest()
    text = json.dumps({"sha256": digest, "data": json.loads(payload)}, ensure_ascii=False)
    write_bytes_atomic(path, text.encode(), mode)


def read_json(path: Path, default: Any = None) -> Any:
    """The data written by ``write_json``, or ``default`` when the file is missing. A damaged file
    (bad JSON, wrong checksum, truncated) is renamed to ``*.corrupt-<time>`` and logged."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return default
    problem = _check(raw)
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
    if not isinstance(wrapper, dict) or set(wrapper) != {"sha256", "data"}:
        return "not a frame state file"
    payload = json.dumps(wrapper["data"], sort_keys=True, ensure_ascii=False)
    if hashlib.sha256(payload.encode()).hexdigest() != wrapper["sha256"]:
        return "checksum mismatch"
    return None
