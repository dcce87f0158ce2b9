"""Who may change things: the owner's token, a login session, CSRF tokens and a login rate limit.

Rules (each has a test in ``tests/web/test_security.py`` or ``tests/web/test_sessions.py``):

* Nothing is shown without the owner (``access.py``); every POST needs a logged-in session. Logging
  in means a one-time pairing code or link (``pairing.py``: ``frame token --pair``, or a code on the
  panel) or typing the owner token (``frame token`` prints it). The session remembers
  a fingerprint of the token, so changing the token logs every phone out, and a random session id
  that must be listed server-side (``sessions.py``): logging out ends the session for every copy of
  its cookie, and "log out everywhere" on the settings page ends all of them, after a page that asks.
* The session cookie is signed with a key generated once and kept in ``<state_dir>/web-secret``
  (mode 0600); it is HttpOnly, SameSite=Lax, and Secure whenever the request came over https.
* Every form carries a per-session CSRF token. We check it ourselves (about twenty lines on top of
  Flask's signed session) instead of adding Flask-WTF and WTForms for four forms. A missing token is
  400, a wrong one 403; a cross-site ``Origin`` header is 403 too.
* Ten failed logins from one address within five minutes lock that address out for the rest of the
  window (429), which makes guessing even a short token impractical. Wrong ``Authorization: Bearer``
  tokens on the JSON API count into the same limiter (``frame.net.ratelimit``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from pathlib import Path
from typing import Any

from frame.atomicfile import write_private_atomic
from frame.net.ratelimit import FailureLimiter

log = logging.getLogger(__name__)

SECRET_FILE = "web-secret"
SECRET_MAX_BYTES = 4096  # the session key is 32 random bytes; a bigger file is not read whole
CSRF_FIELD = "csrf_token"
SESSION_DAYS = 90


def load_or_create_secret(state_dir: Path) -> bytes:
    """The session-signing key: created once (0600, written via a temp name), then reused."""
    path = state_dir / SECRET_FILE
    try:
        with open(path, "rb") as file:
            key = file.read(SECRET_MAX_BYTES + 1)
        if 32 <= len(key) <= SECRET_MAX_BYTES:
            return key
        log.warning("%s is too %s; generating a new session key (everyone is logged out)", path,
                    "short" if len(key) < 32 else "long")
    except FileNotFoundError:
        pass

    state_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    write_private_atomic(path, key)
    log.info("generated the web session key %s", path)
    return key


def fingerprint(token: str) -> str:
    """What the session stores instead of the token itself."""
    return hashlib.sha256(b"frame-web-session:" + token.encode("utf-8")).hexdigest()[:32]


def tokens_match(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing does not leak the token."""
    return bool(expected) and hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def csrf_token(session: Any) -> str:
    """This session's CSRF token, created on first use."""
    if CSRF_FIELD not in session:
        session[CSRF_FIELD] = secrets.token_urlsafe(32)
    return session[CSRF_FIELD]


def csrf_problem(session: Any, submitted: str | None) -> int | None:
    """None when ``submitted`` matches the session's token; else the HTTP status to answer (400/403)."""
    if not submitted:
        return 400
    expected = session.get(CSRF_FIELD)
    if not expected or not hmac.compare_digest(submitted.encode("utf-8"), expected.encode("utf-8")):
        return 403
    return None


# The login form and the API's bearer header share one limiter (``frame.net.ratelimit``).
LoginLimiter = FailureLimiter
