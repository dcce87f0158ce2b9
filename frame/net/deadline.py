"""HTTP for prompt feeds and a model's small files: one wall-clock deadline per fetch, and a redirect
policy (feeds).

Deadline. requests' timeouts apply to each socket operation, so a server that sends its headers (or
body) one byte a second never trips them: one such feed held a 10 s fetch for 100 s. A ``Deadline``
covers everything one fetch does on the network — connecting, the header phase, the body, redirects,
retries. When it passes, a timer shuts down every socket the fetch opened, which ends the blocked
read at once; the fetch then fails with "no complete answer within N s". The sockets are found by
``DeadlineSession``'s connection classes, which tell the deadline of the calling thread about each socket
they create or reuse (urllib3's pool hooks ``ConnectionCls``/``_new_conn``; the drip tests fail if a
urllib3 upgrade bypasses them). DNS resolution is not interruptible this way; feeds on the LAN use
addresses or a local resolver.

Redirects. Followed by the fetcher itself (``next_location``): at most ``MAX_REDIRECTS``, and only to
http(s) URLs — never ``file:`` or any other scheme. Redirects to other hosts, private addresses
included, are fine: on a home network that is where feeds live.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

MAX_REDIRECTS = 5
REDIRECT_SCHEMES = ("http", "https")
_current = threading.local()


class DeadlinePassed(Exception):
    """The fetch's wall-clock deadline passed (its sockets were shut down)."""


class Deadline:
    """``with Deadline(seconds) as deadline:`` — every socket a ``DeadlineSession`` opens or reuses in
    this thread inside the block is shut down when ``seconds`` of wall time have passed. ``setting``
    names the configuration key that sets ``seconds``, for the message."""

    def __init__(self, seconds: float, setting: str = "feeds.timeout_seconds") -> None:
        self.seconds = seconds
        self.setting = setting
        self.end = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._cut)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()
        _current.deadline = None
        with self._lock:
            self._sockets.clear()

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def check(self) -> None:
        """Raise DeadlinePassed when the deadline has passed (call between steps of the fetch)."""
        if self.expired or time.monotonic() >= self.end:
            self.expired = True
            raise DeadlinePassed(self.message)

    @property
    def message(self) -> str:
        return f"no complete answer within {self.seconds:g} s ({self.setting}): slow server"

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            if self.expired:
                _shutdown(sock)
            elif all(known is not sock for known in self._sockets):
                self._sockets.append(sock)

    def _cut(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


def _watch(sock: socket.socket | None) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.watch(sock)


class _WatchedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watch(sock)
        return sock

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:  # a kept-alive connection skips _new_conn
        _watch(self.sock)
        return super().getresponse(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watch(sock)  # before the TLS handshake, which a slow server can drip too
        return sock

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        _watch(self.sock)
        return super().getresponse(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class _WatchedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class DeadlineSession(requests.Session):
    """A requests session whose sockets a ``Deadline`` can cut."""

    def __init__(self) -> None:
        super().__init__()
        for prefix in ("http://", "https://"):
            self.mount(prefix, _WatchedAdapter())


class RedirectRefused(Exception):
    """A redirect the feed policy does not follow (scheme or count)."""


def next_location(response: requests.Response, hops: int) -> str | None:
    """The absolute URL ``response`` redirects to, or None when it is not a redirect. Raises
    RedirectRefused for a non-http(s) target or more than MAX_REDIRECTS hops."""
    if not response.is_redirect:
        return None
    target = urljoin(response.url, response.headers["Location"].strip())
    scheme = urlsplit(target).scheme.lower()
    if scheme not in REDIRECT_SCHEMES:
        raise RedirectRefused(f"redirected to a {scheme}: URL; feeds follow only http(s) redirects")
    if hops >= MAX_REDIRECTS:
        raise RedirectRefused(f"more than {MAX_REDIRECTS} redirects")
    return target
