"""The owner token: every change through the API needs ``Authorization: Bearer TOKEN``.

It is ``web.token`` from the configuration when set; otherwise it is generated once (first start) into
``<state_dir>/token`` with 0600 permissions and read from there by the daemon, ``frame token``, the
CLI client commands and the web pages.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import stat
from pathlib import Path

from frame.atomicfile import write_private_atomic
from frame.errors import FrameError

log = logging.getLogger(__name__)

TOKEN_FILE = "token"
MIN_LENGTH = 12


def token_path(state_dir: str | Path) -> Path:
    return Path(state_dir).expanduser() / TOKEN_FILE


def read_token(state_dir: str | Path) -> str | None:
    """The generated token, or None when there is none yet. Refuses a file others can read."""
    path = token_path(state_dir)
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise FrameError(f"cannot read the token file {path}: {exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise FrameError(f"the token file {path} is readable by others; run: chmod 600 {path}")
    if len(text) < MIN_LENGTH or any(c.isspace() for c in text):
        return None  # damaged (e.g. truncated by a power cut): treat as missing and regenerate
    return text


def ensure_token(configured: str, state_dir: str | Path) -> str:
    """The owner token: the configured one, else the stored one, else a new one saved with 0600."""
    if configured:
        return configured
    existing = read_token(state_dir)
    if existing:
        return existing
    path = token_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    write_private_atomic(path, (token + "\n").encode())
    log.info("generated a new owner token in %s (show it with: frame token)", path)
    return token


def token_matches(header: str | None, token: str) -> bool:
    """Constant-time check of an ``Authorization: Bearer ...`` header value."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode())
