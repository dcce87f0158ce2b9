"""Server-side login sessions, so logging out really ends a session.

The session cookie is signed, but a signature alone cannot be taken back: before this registry a
cookie copied off a phone kept working for its whole 90 days after the owner logged out. Now every
login gets a random session id that is stored in the signed cookie *and* listed here; a request is
logged in only while its id is listed. Logging out removes the id, "log out everywhere" empties the
list, and a session unused for ``SESSION_DAYS`` expires.

The list lives in ``<state_dir>/web-sessions.json`` (mode 0600, written atomically with a checksum)
so a restart or a power cut does not log the owner out. It holds SHA-256 digests of the ids, never
the ids themselves, and at most ``MAX_SESSIONS`` entries (the least recently used go first). A damaged
file is set aside and everyone logs in again.

A logout must hold even when it cannot be written (a full SD card): the list in memory already refuses
the session, and so that a restart does not bring the old list back, the file is removed instead (a
removal needs no free space). After the next restart every phone logs in again; the logout page says
so. Only when even the removal fails can a restart undo the logout, and the page says that instead.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from frame.atomicfile import fsync_dir
from frame.statefile import read_json, write_json
from frame.web.auth import SESSION_DAYS

log = logging.getLogger(__name__)

SESSIONS_FILE = "web-sessions.json"
MAX_SESSIONS = 64
SEEN_WRITE_SECONDS = 24 * 3600  # "last used" reaches the disk at most once a day per session
SAVE_RETRY_SECONDS = 600  # after a failed save (full disk), the list is written again this much later

# how a logout was kept (SessionRegistry.revoke): written; not written, so the file was removed and a
# restart logs everyone out; not written and not removed, so a restart may undo it
SAVED, FORGOT_ALL, UNSAVED = "saved", "forgot-all", "unsaved"


def _digest(session_id: str) -> str:
    return hashlib.sha256(b"frame-web-session-id:" + session_id.encode("utf-8", "replace")).hexdigest()


class SessionRegistry:
    """The ids of the sessions that are logged in (thread-safe; persisted on every login/logout)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        data = read_json(self.path, default={})
        self._seen: dict[str, float] = {
            key: float(value) for key, value in (data.items() if isinstance(data, dict) else ())
            if isinstance(key, str) and isinstance(value, (int, float))}
        self._saved_seen = dict(self._seen)
        self._retry_at: float | None = None  # a save failed: try again then (not on every request)

    def create(self) -> str:
        """A new logged-in session; returns its id for the cookie."""
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._expire()
            self._seen[_digest(session_id)] = self._clock()
            while len(self._seen) > MAX_SESSIONS:
                del self._seen[min(self._seen, key=self._seen.__getitem__)]
            self._save()
        return session_id

    def valid(self, session_id: object) -> bool:
        """True while ``session_id`` is logged in; also records that it was used."""
        if not isinstance(session_id, str) or not session_id:
            return False
        key = _digest(session_id)
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                return False
            if now - seen > SESSION_DAYS * 86400:
                del self._seen[key]
                self._save()
                return False
            self._seen[key] = now
            due = now - self._saved_seen.get(key, 0.0) > SEEN_WRITE_SECONDS
            if self._retry_at is not None:
                due = now >= self._retry_at
            if due:
                self._save()
            return True

    def revoke(self, session_id: object) -> str:
        """Log one session out (its cookie stops working everywhere it was copied to). Returns how
        the logout was kept: ``SAVED``, ``FORGOT_ALL`` or ``UNSAVED`` (see :meth:`_save_revocation`)."""
        if not isinstance(session_id, str):
            return SAVED
        with self._lock:
            if self._seen.pop(_digest(session_id), None) is None:
                return SAVED
            return self._save_revocation()

    def revoke_all(self) -> tuple[int, str]:
        """Log every session out; returns how many there were and how that was kept (as ``revoke``)."""
        with self._lock:
            count = len(self._seen)
            self._seen.clear()
            return count, self._save_revocation()

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def _expire(self) -> None:
        cutoff = self._clock() - SESSION_DAYS * 86400
        for key in [k for k, seen in self._seen.items() if seen < cutoff]:
            del self._seen[key]

    def _save_revocation(self) -> str:
        """Write the list after a logout; when that fails, remove the file so a restart cannot bring
        the logged-out session back (it starts with no sessions: everyone logs in again)."""
        if self._save():
            return SAVED
        try:
            self.path.unlink(missing_ok=True)
            fsync_dir(self.path.parent)
        except OSError as exc:
            log.error("could not remove %s either: a restart may undo this logout: %s", self.path, exc)
            return UNSAVED
        log.warning("web sessions: the logout could not be written, so %s was removed: after the next "
                    "restart every phone must log in again", self.path)
        return FORGOT_ALL

    def _save(self) -> bool:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json(self.path, self._seen, mode=0o600)
        except OSError as exc:  # a full disk must not break logins: the list still works in memory
            log.error("could not save the web sessions to %s: %s", self.path, exc)
            self._retry_at = self._clock() + SAVE_RETRY_SECONDS
            return False
        self._saved_seen = dict(self._seen)
        self._retry_at = None
        return True
