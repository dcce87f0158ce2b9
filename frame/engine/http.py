"""HTTP byte source: Range requests over keep-alive sessions, with retries and clear failures.

Each thread gets its own ``requests.Session`` (sessions are not thread-safe) so the prefetch thread and
the caller never share a connection. Transient failures — 5xx / 429 answers, dropped connections,
timeouts and bodies shorter than asked — are retried with exponential backoff, waiting at least as
long as a ``Retry-After`` header asks (Hugging Face answers bursts with 429). A server that answers a
Range request with the whole file (200 instead of 206) is a configuration problem, not a transient
one: it fails at once with a message saying so, before the body is read.
"""

from __future__ import annotations

import logging
import re
import threading
import time

import numpy as np

from frame.engine.errors import WeightFetchError
from frame.engine.sources import SourceTruncated

log = logging.getLogger(__name__)

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is capped rather than obeyed


class _Transient(Exception):
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


class HttpSource:
    """``read_at`` over HTTP Range requests; nothing is written to disk."""

    def __init__(self, url: str, retries: int = 5, backoff: float = 0.5, timeout: float = 60.0) -> None:
        self.location = url
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self._local = threading.local()
        self._size: int | None = None

    def _session(self):
        session = getattr(self._local, "session", None)
        if session is None:
            import requests

            session = requests.Session()
            self._local.session = session
        return session

    def size(self) -> int:
        """Total size from the Content-Range of a one-byte request (also proves Range support)."""
        if self._size is None:
            self._read_range(0, 1)
        assert self._size is not None
        return self._size

    def read_at(self, offset: int, length: int) -> np.ndarray:
        if length == 0:
            return np.empty(0, dtype=np.uint8)
        return np.frombuffer(self._read_range(offset, length), dtype=np.uint8)

    def _read_range(self, offset: int, length: int) -> bytes:
        attempt = 0
        while True:
            try:
                return self._attempt(offset, length)
            except _Transient as exc:
                attempt += 1
                if attempt > self.retries:
                    raise WeightFetchError(
                        f"{self.location}: bytes {offset}..{offset + length} failed after "
                        f"{self.retries} retries: {exc}") from None
                delay = max(self.backoff * 2 ** (attempt - 1), exc.retry_after or 0.0)
                log.warning("%s: %s; retry %d/%d in %.1f s", self.location, exc, attempt, self.retries, delay)
                self._local.session = None  # a fresh connection after any failure
                time.sleep(delay)

    def _attempt(self, offset: int, length: int) -> bytes:
        import requests

        headers = {"Range": f"bytes={offset}-{offset + length - 1}"}
        try:
            with self._session().get(self.location, headers=headers, stream=True, timeout=self.timeout) as r:
                self._check_status(r, offset, length)
                body = r.content
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            raise _Transient(f"connection problem ({type(exc).__name__})") from exc
        except OSError as exc:  # urllib3 protocol errors surface as OSError subclasses
            raise _Transient(f"connection problem ({exc})") from exc
        if len(body) != length:
            raise _Transient(f"short body: got {len(body)} of {length} bytes")
        return body

    def _check_status(self, r, offset: int, length: int) -> None:
        if r.status_code == 206:
            self._note_size(r.headers.get("Content-Range", ""), offset, length)
            return
        if r.status_code == 200:
            raise WeightFetchError(
                f"{self.location}: the server ignored the Range header (answered 200 with the whole file "
                "instead of 206); frame streams weights and needs a server that supports range requests")
        if r.status_code == 416:
            raise SourceTruncated(f"{self.location} ends before byte {offset + length} (HTTP 416)")
        if r.status_code >= 500 or r.status_code == 429:
            raise _Transient(f"HTTP {r.status_code}", _retry_after(r.headers.get("Retry-After")))
        raise WeightFetchError(f"{self.location}: HTTP {r.status_code} {r.reason}")

    def _note_size(self, content_range: str, offset: int, length: int) -> None:
        match = _CONTENT_RANGE.match(content_range)
        if not match:
            return
        if match.group(3) != "*":
            self._size = int(match.group(3))
            if offset + length > self._size:
                raise SourceTruncated(
                    f"{self.location} has {self._size} bytes, but bytes {offset}..{offset + length} are needed")

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None
