"""Connection limits for waitress, so idle or dribbling sockets cannot lock the owner out.

waitress keeps every connection until it has been idle for ``channel_timeout`` (120 s), counts any
received byte as activity, and stops accepting once ``connection_limit`` (100) connections are open.
So 110 sockets that each send a request's headers one byte at a time — or 99 downloads nobody reads —
made the daemon's ``GET /api/status`` and ``frame serve-model`` unreachable for as long as the sender
liked. ``GuardedServer`` changes three things:

* **never full**: the server keeps accepting. When the new connection's address already holds
  ``PER_ADDRESS`` connections, or the server ``MAX_CONNECTIONS``, the *stalest* connection of that
  address (else of the address holding the most) is closed to make room. Stalest means: still sending
  the headers of a request begun longest ago, else idle longest; a connection whose request is being
  served is never closed this way. A new connection is therefore always served, whoever holds the
  others (the owner on the same address as an attacker included), and one address can hold at most
  ``PER_ADDRESS`` of the slots;
* **request headers within ``HEAD_SECONDS``** (10 s) of their first byte, however steadily they
  trickle; then the connection is closed (``GuardedChannel`` notes when each request head began);
* **idle for ``IDLE_SECONDS``** (30 s instead of 120) — no request and nothing sent or received,
  which includes a download the client stopped reading — and the connection is closed. Clients
  reconnect on their own (browsers, requests' pools, frame's weight streaming).

``create_guarded_server`` stands in for ``waitress.create_server`` for TCP listeners.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import Counter
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

log = logging.getLogger(__name__)

PER_ADDRESS = 16       # a browser opens up to 6 per host; frame's clients 1-4
MAX_CONNECTIONS = 100  # waitress's own default limit
HEAD_SECONDS = 10      # the feeds' slow-server cut is 10 s too
IDLE_SECONDS = 30
CLEANUP_SECONDS = 1    # how often the limits are checked (waitress reads it as an int)


class GuardedChannel(HTTPChannel):
    """A waitress channel that remembers when the request head it is receiving began."""

    head_started: float | None = None

    def received(self, data: bytes) -> bool:
        if data and self.request is None and self.head_started is None:
            self.head_started = time.time()
        result = super().received(data)
        if self.request is None or self.request.headers_finished:
            self.head_started = None
        return result

    def stale_since(self) -> float:
        """Since when this connection has not moved on: its unfinished head's start, else its last I/O."""
        return self.head_started if self.head_started is not None else self.last_activity

    def evictable(self) -> bool:
        return not self.requests  # a request being served keeps its connection


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with the limits of the module docstring."""

    channel_class = GuardedChannel
    per_address = PER_ADDRESS
    max_connections = MAX_CONNECTIONS
    head_seconds = HEAD_SECONDS

    def readable(self) -> bool:
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        return bool(self.accepting)  # never stop accepting: handle_accept makes room

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # idle longer than channel_timeout
        for channel in list(self.active_channels.values()):
            started = getattr(channel, "head_started", None)
            if started is not None and now - started > self.head_seconds and not channel.will_close:
                log.info("closing a connection from %s: request headers not complete within %d s",
                         _host(channel.addr), self.head_seconds)
                channel.will_close = True

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
            if accepted is None:
                return
            conn, addr = accepted
            self.set_socket_options(conn)
        except OSError:
            return  # the client went away before we got to it
        addr = self.fix_addr(addr)
        if not self._make_room(_host(addr)):
            log.warning("refusing a connection from %s: every connection is serving a request", _host(addr))
            conn.close()
            return
        self.channel_class(self, conn, addr, self.adj, map=self._map)

    def _make_room(self, host: str) -> bool:
        """True when a connection from ``host`` may be added (closing the stalest one if need be)."""
        channels = [c for c in self._map.values() if isinstance(c, GuardedChannel) and c.connected]
        mine = [c for c in channels if _host(c.addr) == host]
        if len(mine) >= self.per_address:
            return self._close_stalest(mine, f"{host} holds {len(mine)} connections")
        if len(channels) >= self.max_connections:
            busiest, _ = Counter(_host(c.addr) for c in channels).most_common(1)[0]
            return self._close_stalest([c for c in channels if _host(c.addr) == busiest],
                                       f"the server holds {len(channels)} connections") \
                or self._close_stalest(channels, f"the server holds {len(channels)} connections")
        return True

    @staticmethod
    def _close_stalest(channels: list[GuardedChannel], why: str) -> bool:
        candidates = [c for c in channels if c.evictable()]
        if not candidates:
            return False
        stalest = min(candidates, key=GuardedChannel.stale_since)
        log.info("%s: closing its stalest connection (from %s) for a new one", why, _host(stalest.addr))
        stalest.handle_close()
        return True


def _host(addr: Any) -> str:
    return str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)


def create_guarded_server(app: Any, host: str, port: int, **adjustments: Any) -> Any:
    """What ``waitress.create_server(app, host=..., port=..., **adjustments)`` returns, built from
    ``GuardedServer`` listeners: one, or several behind a ``MultiSocketServer`` when ``host`` names
    more than one address."""
    adj = Adjustments(host=host, port=port, channel_timeout=IDLE_SECONDS, cleanup_interval=CLEANUP_SECONDS,
                      connection_limit=MAX_CONNECTIONS, **adjustments)
    socket_map: dict = {}
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    servers = [GuardedServer(app, socket_map, dispatcher=dispatcher, adj=adj, sockinfo=info)
               for info in adj.listen if info[0] in (socket.AF_INET, socket.AF_INET6)]
    if len(servers) == 1:
        return servers[0]
    listening = [(s.effective_host, s.effective_port) for s in servers]
    return MultiSocketServer(socket_map, adj, listening, dispatcher, servers[-1].log_info)
