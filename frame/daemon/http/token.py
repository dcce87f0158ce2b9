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
MAX_FILE_BYTES = 4096  # the token file: one token of at most a few hundred characters


def token_problem(text: str) -> str | None:
    """Why ``text`` cannot be an owner token, or None. Tokens are printable ASCII without spaces: HTTP
    headers carry them as latin-1, so anything else can never match (and the CLI cannot send it)."""
    if len(text) < MIN_LENGTH:
        return f"is shorter than {MIN_LENGTH} characters"
    if not all("!" <= c <= "~" for c in text):
        return "must be printable ASCII (letters, digits, punctuation; no spaces or accents)"
    return None


def token_path(state_dir: str | Path) -> Path:
    return Path(state_dir).expanduser() / TOKEN_FILE


def read_token(state_dir: str | Path) -> str | None:
    """The generated token, or None when there is none yet or the file is damaged (truncated by a
    power cut, not text, not a printable-ASCII token): ``ensure_token`` then writes a new one.
    Refuses a file others can read."""
    return _read(token_path(state_dir))[0]


def _read(path: Path) -> tuple[str | None, str | None]:
    """(token, why the file is unusable): both None when there is no file."""
    try:
        mode = path.stat().st_mode
        with open(path, "rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)  # a token is a line; a bigger file is not read whole
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise FrameError(f"cannot read the token file {path}: {exc.strerror or exc}; "
                         f"delete it and a new token is generated") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise FrameError(f"the token file {path} is readable by others; run: chmod 600 {path}")
    if len(raw) > MAX_FILE_BYTES:
        return None, f"it is more than {MAX_FILE_BYTES} bytes"
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        return None, "it is not ASCII text"
    problem = token_problem(text)
    return (None, f"the token {problem}") if problem else (text, None)


def ensure_token(configured: str, state_dir: str | Path) -> str:
    """The owner token: the configured one, else the stored one, else a new one saved with 0600."""
    if configured:
        return configured
    path = token_path(state_dir)
    existing, damage = _read(path)
    if existing:
        return existing
    if damage:  # replacing it is what the owner would do; refusing would stop every start
        log.warning("the token file %s was damaged (%s); generating a new owner token "
                    "(phones must log in again; frame token prints it)", path, damage)
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
