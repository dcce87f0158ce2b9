"""Pairing a phone without typing the 32-character owner token.

A pairing is a one-time secret that logs one browser in, as the token would, and is then gone:

* ``frame token --pair`` (on the frame, as the owner) makes one and prints a link,
  ``http://<frame>:8080/pair/<secret>`` (also as a terminal QR code for the phone's camera), and a
  short code of ``CODE_LENGTH`` characters to type on the login page instead;
* the login page's "Show a code on the frame" button makes one whose short code only the panel shows,
  so only someone standing at the frame can use it.

Each pairing lives ``LIFETIME_SECONDS`` (10 minutes) and works once: redeeming its code or its link
removes it. The file ``<state_dir>/web-pairing.json`` (mode 0600, written atomically with a checksum
under a lock file, since ``frame token --pair`` writes it from another process than the daemon)
holds salted SHA-256 digests, never a code. At most ``MAX_PENDING`` pairings wait; the oldest go first.

Guessing a short code is infeasible within its life: the alphabet has 30 symbols (no 0/O, 1/I/L, U),
so 8 characters are 30^8 ≈ 6.6·10^11 codes, and the pages let at most ``GLOBAL_FAILURES`` wrong codes
per ``GLOBAL_WINDOW`` through from all addresses together (``frame.web.pair_views``), besides the
per-address count the token login shares: at most 60 guesses while a code lives, a chance of about
one in 10^10. A link's secret is 32 random bytes.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frame.statefile import read_json, write_json

log = logging.getLogger(__name__)

PAIRING_FILE = "web-pairing.json"
LOCK_FILE = "web-pairing.lock"
ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"  # nothing two people read alike (0/O, 1/I/L, U/V)
CODE_LENGTH = 8
LIFETIME_SECONDS = 600
MAX_PENDING = 8
MAX_FILE_BYTES = 64 * 1024  # a few pairings take ~2 kB; anything far larger is not ours
GLOBAL_FAILURES = 30
GLOBAL_WINDOW = 300.0
LINK_PREFIX = "/pair/"
PANEL_INTERVAL = 120.0  # seconds between two codes shown on the panel (an e-paper refresh takes ~30 s)


@dataclass(frozen=True)
class Pairing:
    """A new pairing: the short code to type and the secret of its link (shown once, never stored)."""

    code: str
    secret: str
    expires_at: float

    def shown_code(self) -> str:
        """The code as people read it: two groups of four (``ABCD-EFGH``)."""
        return f"{self.code[:4]}-{self.code[4:]}"

    def link(self, base_url: str) -> str:
        return base_url.rstrip("/") + LINK_PREFIX + self.secret


def normalise(typed: str) -> str:
    """What a person typed, as a code: upper case, without the spaces or dash shown between groups."""
    return "".join(ch for ch in str(typed)[:64].upper() if ch.isascii() and ch.isalnum())


def _digest(salt: str, kind: str, value: str) -> str:
    return hashlib.sha256(f"frame-pairing:{kind}:{salt}:{value}".encode()).hexdigest()


class PairingCodes:
    """The pending pairings of one state folder (thread-safe; every change re-reads the file, so a
    pairing ``frame token --pair`` just made in another process is found)."""

    def __init__(self, state_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(state_dir) / PAIRING_FILE
        self._lock_path = Path(state_dir) / LOCK_FILE
        self._clock = clock
        self._lock = threading.Lock()

    def create(self, origin: str) -> Pairing:
        """A new pairing (``origin``: who asked, for the log: "frame token", "panel")."""
        code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_hex(16)
        expires = self._clock() + LIFETIME_SECONDS
        with self._locked() as entries:
            entries.append({"salt": salt, "code": _digest(salt, "code", code), "link": _digest(salt, "link", secret),
                            "expires": expires, "origin": origin})
            del entries[:-MAX_PENDING]
        log.info("web: a pairing code was made (%s); it works once, for %d minutes", origin, LIFETIME_SECONDS // 60)
        return Pairing(code, secret, expires)

    def redeem_code(self, typed: str) -> str | None:
        """Use up the pairing whose short code was typed; its origin, or None (wrong, used or expired)."""
        code = normalise(typed)
        if len(code) != CODE_LENGTH:
            return None
        return self._redeem("code", code)

    def redeem_link(self, secret: str) -> str | None:
        """Use up the pairing whose link this is; its origin, or None."""
        if not secret or len(secret) > 100:
            return None
        return self._redeem("link", secret)

    def pending(self) -> int:
        with self._locked() as entries:
            return len(entries)

    def _redeem(self, kind: str, value: str) -> str | None:
        with self._locked() as entries:
            for entry in entries:
                if hmac.compare_digest(entry[kind], _digest(entry["salt"], kind, value)):
                    entries.remove(entry)  # single use: gone before the session exists
                    return str(entry.get("origin") or "?")
        return None

    def _locked(self) -> _Entries:
        return _Entries(self)


class _Entries:
    """``with codes._locked() as entries``: the unexpired entries under the thread and file locks,
    written back (atomically) when the block changed them."""

    def __init__(self, codes: PairingCodes) -> None:
        self.codes = codes
        self.entries: list[dict[str, Any]] = []
        self.before: list[dict[str, Any]] = []
        self.handle: Any = None

    def __enter__(self) -> list[dict[str, Any]]:
        codes = self.codes
        codes._lock.acquire()
        try:
            codes.path.parent.mkdir(parents=True, exist_ok=True)
            self.handle = os.fdopen(os.open(codes._lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a")
            fcntl.flock(self.handle, fcntl.LOCK_EX)
            stored = _read(codes.path)
        except BaseException:
            self._release()
            raise
        now = codes._clock()
        self.before = stored
        self.entries = [e for e in stored if e["expires"] > now]
        return self.entries

    def __exit__(self, kind: Any, exc: Any, trace: Any) -> None:
        try:
            if kind is None and self.entries != self.before:
                write_json(self.codes.path, self.entries, mode=0o600)
        finally:
            self._release()

    def _release(self) -> None:
        if self.handle is not None:
            self.handle.close()  # closing drops the flock
            self.handle = None
        self.codes._lock.release()


def _read(path: Path) -> list[dict[str, Any]]:
    """The stored entries; a file too large or of another shape counts as none (and is logged)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            log.error("%s is larger than %d bytes; ignoring it (no pairing codes)", path, MAX_FILE_BYTES)
            return []
    except FileNotFoundError:
        return []
    data = read_json(path, default=[])
    if not isinstance(data, list):
        log.error("%s does not hold a list of pairings; ignoring it", path)
        return []
    keys = {"salt": str, "code": str, "link": str, "expires": (int, float), "origin": str}
    return [entry for entry in data if isinstance(entry, dict)
            and all(isinstance(entry.get(k), t) and not isinstance(entry.get(k), bool) for k, t in keys.items())]
