"""Per-request body limits for waitress, decided from the request's headers before any body byte is read.

waitress reads a whole request body before the application sees the request, spooling anything above
``inbuf_overflow`` to a temporary file, and it has one ``max_request_body_size`` for every request. The
frame needs two: 64 KiB for everything (so nobody on the LAN can make it buffer or spool large bodies),
and 20 MB for one route, the owner's photo upload. A ``BodyPolicy`` looks at the request line and the
headers (the session cookie, the declared ``Content-Length``) as soon as they are parsed and may raise
the cap for that one request; everything else keeps the server's cap. An admitted body larger than
the server's in-memory buffer is spooled to a temporary file like any waitress body: several large
uploads at once then cost disk, not the daemon's memory (a refused body is never read, so
nobody but the owner can make the frame write one).

The policy runs in waitress's socket thread: it must be quick and must not raise (an exception counts
as "no", and is logged).

A body refused from its headers is answered by waitress itself, before any application code: a bare
text page ("Request Entity Too Large / exceeds max_body of 65537") that a phone shows unstyled and
~980 px wide. An app may offer a ``TooLargePage`` (``app.extensions[TOO_LARGE_PAGE_KEY]``) that gives
the answer instead: the phone pages say the limit that applies (20 MB for a photo) and link back.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from waitress.buffers import OverflowableBuffer
from waitress.parser import HTTPRequestParser
from waitress.receiver import FixedStreamReceiver
from waitress.utilities import Error, RequestEntityTooLarge

log = logging.getLogger(__name__)

# Where an app offers its policy (``app.extensions[BODY_POLICY_KEY]``); ``HttpServer`` picks it up.
BODY_POLICY_KEY = "frame.net.body_policy"
# Room above the default cap in the in-memory buffer (server.py): a chunked body may overshoot by one read.
RECV_SLACK = 64 * 1024


@dataclass(frozen=True)
class RequestHead:
    """What a policy may look at: the method, the path (percent-decoded, as WSGI's ``PATH_INFO``) and
    the headers as waitress keeps them (upper case, ``-`` as ``_``: ``COOKIE``, ``CONTENT_LENGTH``).
    ``content_length`` is the declared length; None for a chunked body, which no policy can admit."""

    method: str
    path: str
    headers: Mapping[str, str]
    content_length: int | None


# The body cap (bytes) for this request, or None for the server's default.
BodyPolicy = Callable[[RequestHead], int | None]
# Where an app offers the answer to a refused body (``app.extensions[TOO_LARGE_PAGE_KEY]``).
TOO_LARGE_PAGE_KEY = "frame.net.too_large_page"
# The answer to a body over ``cap`` bytes: (content type, body bytes), or None for waitress's own text.
TooLargePage = Callable[[RequestHead, int], tuple[str, bytes] | None]


class _TooLarge(Error):
    """waitress's 413 with the app's own page (``TooLargePage``) as its body."""

    code = RequestEntityTooLarge.code
    reason = RequestEntityTooLarge.reason

    def __init__(self, content_type: str, body: bytes) -> None:
        super().__init__("")
        self.content_type, self.page = content_type, body

    def to_response(self, ident: str | None = None) -> tuple[str, list[tuple[str, str]], bytes]:
        return (f"{self.code} {self.reason}",
                [("Content-Type", self.content_type), ("X-Content-Type-Options", "nosniff"),
                 ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")], self.page)


class _Widened:
    """waitress ``Adjustments`` copies with a larger body cap, one per cap (they are read-only)."""

    def __init__(self) -> None:
        self._copies: dict[tuple[int, int], Any] = {}
        self._lock = threading.Lock()

    def get(self, adj: Any, cap: int) -> Any:
        key = (id(adj), cap)
        with self._lock:
            widened = self._copies.get(key)
            if widened is None:
                widened = copy.copy(adj)
                widened.max_request_body_size = cap + 1  # waitress refuses bodies of this size or more
                self._copies[key] = widened
        return widened


def _policy_parser(policy: BodyPolicy | None, too_large: TooLargePage | None) -> type[HTTPRequestParser]:
    widened = _Widened()

    class PolicyParser(HTTPRequestParser):
        head: RequestHead | None = None

        def parse_header(self, header_plus: bytes) -> None:
            super().parse_header(header_plus)
            head = RequestHead(self.command, self.path, self.headers,
                               None if self.chunked else self.content_length)
            self.head = head
            if policy is None:
                return
            try:
                cap = policy(head)
            except Exception:
                log.exception("the request body policy failed for %s %s; using the default cap",
                              self.command, self.path)
                cap = None
            if cap is None or self.chunked or cap < self.adj.max_request_body_size:
                return
            self.adj = widened.get(self.adj, cap)
            if self.body_rcv is not None and self.content_length <= cap:
                # the body is not read yet: a buffer that spools beyond the server's in-memory size
                self.body_rcv = FixedStreamReceiver(self.content_length, OverflowableBuffer(self.adj.inbuf_overflow))

        def received(self, data: bytes) -> int:
            consumed = super().received(data)
            if too_large is not None and isinstance(self.error, RequestEntityTooLarge) and self.head is not None:
                try:
                    page = too_large(self.head, self.adj.max_request_body_size - 1)
                except Exception:
                    log.exception("the too-large page failed for %s %s", self.command, self.path)
                    page = None
                if page is not None:
                    self.error = _TooLarge(*page)
            return consumed

    return PolicyParser


def install(server: Any, policy: BodyPolicy | None, too_large: TooLargePage | None = None) -> None:
    """Make the waitress ``server`` (what ``create_server`` returns: one listening server, or several
    behind a ``MultiSocketServer``) ask ``policy`` for each request's body cap, and ``too_large`` for
    the answer to a body over its cap."""
    parser = _policy_parser(policy, too_large)
    servers = [server] if hasattr(server, "channel_class") else [
        s for s in getattr(server, "map", {}).values() if hasattr(s, "channel_class")]
    for listening in servers:  # keep the server's own channel (``connguard``), with the policy's parser
        base = listening.channel_class
        listening.channel_class = type("PolicyChannel", (base,), {"parser_class": parser})
