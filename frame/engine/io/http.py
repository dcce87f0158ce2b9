"""HTTP byte source: Range requests over keep-alive sessions, retried until a time budget runs out.

Each thread gets its own ``requests.Session`` (sessions are not thread-safe) so the prefetch thread and
the caller never share a connection. Transient failures — 5xx / 429 answers, refused or dropped
connections, timeouts and bodies shorter than asked — are retried with exponential backoff (capped,
and at least as long as a ``Retry-After`` header asks) for as long as ``HttpSettings.give_up_seconds``
allows, so a NAS waking from sleep or a Wi-Fi drop costs minutes, not the night. Problems no retry can
fix fail at once with a message naming the fix: a server that answers a Range request with the whole
file (200 instead of 206), an access refusal (401/403), a missing file.

Bodies are read straight into a numpy buffer, so a 112 MB weight costs 112 MB, not twice that. URLs
are shown only through ``redact_url``: credentials in a model URL (``https://user:password@nas/...``)
reach the server but never a message or a log line.
"""

from __future__ import annotations

import dataclasses
import http.client
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import requests
import urllib3

from frame.engine.errors import ServerUnreachable, SourceTruncated, WeightFetchError
from frame.engine.io.fetch_stats import FetchStats
from frame.engine.io.http_settings import HttpSettings
from frame.redact import redact_text, redact_url

log = logging.getLogger(__name__)

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is capped rather than obeyed
READ_CHUNK = 1 << 20
T = TypeVar("T")

SERVERS_THAT_WORK = ("nginx, Caddy, Apache httpd or 'frame serve-model FOLDER' "
                     "(see docs/serving-models.md; 'python -m http.server' does not support ranges)")


class Transient(Exception):
    """A failure worth retrying; ``retry_after`` is the server's requested wait, if it sent one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header in its delta-seconds form (HTTP dates are ignored)."""
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER) if value else None
    except ValueError:
        return None


def with_retries(settings: HttpSettings, what: str, attempt: Callable[[], T]) -> T:
    """``attempt()`` until it succeeds, retrying ``Transient`` failures within the settings' budget."""
    clock = settings.clock
    failures, first_failure = 0, None
    while True:
        started = clock.monotonic()
        try:
            return attempt()
        except Transient as exc:
            first_failure = started if first_failure is None else first_failure
            failures += 1
            waited = clock.monotonic() - first_failure
            if (settings.retries is not None and failures > settings.retries) or waited >= settings.give_up_seconds:
                raise ServerUnreachable(
                    f"{what} failed after {failures - 1} retries over {waited:.0f} s: {exc} "
                    "(is the model server on and reachable?)") from None
            delay = max(min(settings.max_backoff, settings.backoff * 2 ** (failures - 1)), exc.retry_after or 0.0)
            log.warning("%s: %s; retry %d in %.1f s", what, exc, failures, delay)
            clock.sleep(delay)


_OBJECT_REPR = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>:? ?")
REASON_CHARS = 200


def _innermost(exc: BaseException) -> BaseException:
    """The failure a requests error wraps: ConnectionError(MaxRetryError(reason=NewConnectionError))
    says "Failed to establish a new connection: [Errno 111] Connection refused" only at the bottom."""
    for _ in range(5):
        reason = getattr(exc, "reason", None)
        inner = reason if isinstance(reason, BaseException) else \
            exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None
        if inner is None:
            break
        exc = inner
    return exc


def brief(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` cut at a word within ``limit`` characters, marked with "…" (a cut once read as
    "Failed to establish ); retry 2", as if the message ended there)."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    return (cut[:cut.rfind(" ")] if " " in cut[limit // 2:] else cut).rstrip(" ,;:") + "…"


def connection_problem(exc: BaseException) -> Transient:
    """A ``Transient`` naming a requests/urllib3/socket failure by kind and by its innermost reason
    ("NewConnectionError: Failed to establish a new connection: [Errno 111] Connection refused"), without
    object addresses, credentials or query values, and short."""
    inner = _innermost(exc)
    reason = _OBJECT_REPR.sub("", str(inner)).strip(" '\"") or type(exc).__name__
    return Transient(f"connection problem ({type(inner).__name__}: {brief(redact_text(reason))})")


def transient_errors() -> tuple[type[BaseException], ...]:
    return (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
            urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def refusal(status: int, shown: str) -> WeightFetchError:
    return WeightFetchError(
        f"{shown}: the model server refused access (HTTP {status}); give it the token in model.token "
        "(frame serve-model --token) or the user:password in model.source (https://user:password@host/...)")


class HttpSource:
    """``read_at`` over HTTP Range requests; nothing is written to disk.

    ``validator`` is the file's ETag (else its size and Last-Modified) from the first answer; a later
    answer with another one means the file was replaced mid-read, which fails instead of mixing two
    versions of the weights.
    """

    def __init__(self, url: str, settings: HttpSettings | None = None, stats: FetchStats | None = None,
                 **overrides) -> None:
        base = settings or HttpSettings()
        self.settings = dataclasses.replace(base, **overrides) if overrides else base
        self.url = url
        self.location = redact_url(url)  # what messages and logs show
        self.stats = stats
        self.validator: str | None = None
        self._local = threading.local()
        self._size: int | None = None

    def _session(self):
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            self._local.session = session
        return session

    def _drop_session(self) -> None:
        session = getattr(self._local, "session", None)
        self._local.session = None
        if session is not None:
            session.close()

    def size(self) -> int:
        """Total size from the Content-Range of a one-byte request (also proves Range support)."""
        if self._size is None:
            self.read_at(0, 1)
        assert self._size is not None
        return self._size

    def read_at(self, offset: int, length: int) -> np.ndarray:
        if length == 0:
            return np.empty(0, dtype=np.uint8)
        started = time.perf_counter()

        def attempt() -> np.ndarray:
            nonlocal started
            started = time.perf_counter()
            try:
                return self._attempt(offset, length)
            except Transient:
                self._drop_session()  # a fresh connection after any failure
                raise

        data = with_retries(self.settings, f"{self.location}: bytes {offset}..{offset + length}", attempt)
        if self.stats is not None:
            self.stats.add("http", length, time.perf_counter() - started)
        return data

    def _attempt(self, offset: int, length: int) -> np.ndarray:
        headers = {"Range": f"bytes={offset}-{offset + length - 1}", "Accept-Encoding": "identity",
                   **self.settings.headers_for(self.url)}
        timeout = self.settings.timeout
        try:
            with self._session().get(self.url, headers=headers, stream=True, timeout=timeout) as r:
                self._check_status(r, offset, length)
                return self._read_body(r, length)
        except transient_errors() as exc:
            raise connection_problem(exc) from exc

    @staticmethod
    def _read_body(r, length: int) -> np.ndarray:
        """The body, read straight into a numpy buffer by the HTTP response underneath urllib3 (no
        intermediate bytes objects: a fifth less client CPU on loopback), else a megabyte at a time."""
        buf = np.empty(length, dtype=np.uint8)
        view = memoryview(buf)
        got = 0
        readinto = getattr(getattr(r.raw, "_fp", None), "readinto", None)
        while got < length:
            if readinto is not None:
                n = readinto(view[got:])
            else:
                chunk = r.raw.read(min(READ_CHUNK, length - got), decode_content=False)
                n = len(chunk)
                view[got:got + n] = chunk
            if not n:
                break
            got += n
        if got != length:
            raise Transient(f"short body: got {got} of {length} bytes")
        if readinto is not None:
            r.raw.release_conn()  # read to its end behind urllib3's back: hand the connection back for reuse
        return buf

    def _check_status(self, r, offset: int, length: int) -> None:
        if r.status_code == 206:
            self._note_answer(r, offset, length)
            return
        if r.status_code == 200:
            raise WeightFetchError(
                f"{self.location}: the server ignored the Range header (answered 200 with the whole file "
                f"instead of 206); frame streams weights and needs a server that supports range requests: "
                f"{SERVERS_THAT_WORK}")
        if r.status_code == 416:
            raise SourceTruncated(f"{self.location} ends before byte {offset + length} (HTTP 416)")
        if r.status_code >= 500 or r.status_code == 429:
            raise Transient(f"HTTP {r.status_code}", _retry_after(r.headers.get("Retry-After")))
        if r.status_code in (401, 403):
            raise refusal(r.status_code, self.location)
        raise WeightFetchError(f"{self.location}: HTTP {r.status_code} {r.reason}")

    def _note_answer(self, r, offset: int, length: int) -> None:
        """Check the Content-Range against the request, learn the size and the file's validator."""
        match = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
        if not match:
            return
        start, end = int(match.group(1)), int(match.group(2))
        if match.group(3) != "*":
            self._size = int(match.group(3))
            if offset + length > self._size:
                raise SourceTruncated(
                    f"{self.location} has {self._size} bytes, but bytes {offset}..{offset + length} are needed")
        if start != offset or end != offset + length - 1:
            raise WeightFetchError(f"{self.location}: asked for bytes {offset}-{offset + length - 1}, the server "
                                   f"answered bytes {start}-{end}")
        validator = r.headers.get("ETag") or f"size={match.group(3)};modified={r.headers.get('Last-Modified', '')}"
        if self.validator is None:
            self.validator = validator
        elif validator != self.validator:
            raise WeightFetchError(f"{self.location} changed on the server while frame was reading it "
                                   f"({self.validator} -> {validator}); the next attempt starts afresh")

    def close(self) -> None:
        self._drop_session()
