"""Connection limits for waitress, so idle or dribbling sockets cannot lock the owner out, and a
crowd behind one address is queued, never reset.

waitress keeps every connection until it has been idle for ``channel_timeout`` (120 s), counts any
received byte as activity, and stops accepting once ``connection_limit`` (100) connections are open.
So 110 sockets that each send a request's headers one byte at a time — or 99 downloads nobody reads —
made the daemon's ``GET /api/status`` and ``frame serve-model`` unreachable for as long as the sender
liked. ``GuardedServer`` changes four things:

* **never full**: the server keeps accepting. When the new connection's address already holds
  ``PER_ADDRESS`` connections, or the server ``MAX_CONNECTIONS``, room is made by shedding one that
  is safe to close, of that address (else of the address holding the most): one whose client has
  gone (EOF waiting), else the stalest *sheddable* one — still sending the headers of a request begun
  more than ``HEAD_GRACE_SECONDS`` ago, sending an answer the client has taken nothing of for
  ``STALL_SECONDS``, or idle (no request, nothing unsent, nothing unread) for more than
  ``IDLE_GRACE_SECONDS``. A connection being served, one whose answer is moving, or one holding a
  request that has just arrived is never closed this way: closing those reset 13 % of the requests of
  16 clients sharing one NAT address;
* **queued, else 503**: a new connection with no room and nothing sheddable waits, unread (its request
  stays in the kernel's buffer), and is served as soon as a connection of its address closes or
  becomes sheddable, newest first. One that waited ``QUEUE_SECONDS``, or the longest waiting when
  ``QUEUE_PER_ADDRESS`` of its address wait, is answered ``503 Service Unavailable`` with
  ``Retry-After`` and closed without a reset (``answer_busy``);
* **request headers within ``HEAD_SECONDS``** (10 s) of their first byte, however steadily they
  trickle; then the connection is closed (``GuardedChannel`` notes when each request head began);
* **idle for ``IDLE_SECONDS``** (30 s instead of 120) — no request and nothing sent or received,
  which includes a download the client stopped reading — and the connection is closed. Clients
  reconnect on their own (browsers, requests' pools, frame's weight streaming).

So an attacker's idle or dribbling sockets are still shed for the owner's new connection (they are
sheddable within a second), while the owner's own busy connections never are.

``create_guarded_server`` stands in for ``waitress.create_server`` for TCP listeners.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter, deque
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
HEAD_GRACE_SECONDS = 0.25  # a request head arrives in one packet; one still arriving after this may be shed
IDLE_GRACE_SECONDS = 0.5   # a kept-alive connection idle this long may be shed for a new one
STALL_SECONDS = 1.0        # an answer nothing of which was taken this long: a download nobody reads
QUEUE_SECONDS = 10         # a new connection waits at most this long for room, then gets a 503
QUEUE_PER_ADDRESS = 48     # connections of one address waiting; one more makes the longest waiting a 503
RETRY_AFTER_SECONDS = 2
ADMIT_EVERY_SECONDS = 0.1  # waiting connections are looked at on the loop's wake-ups, at most this often
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 40\r\nConnection: close\r\n\r\ntoo many connections; retry in a moment\n"
        % RETRY_AFTER_SECONDS)


class GuardedChannel(HTTPChannel):
    """A waitress channel that remembers when the request head it is receiving began."""

    head_started: float | None = None

    def received(self, data: bytes) -> bool:
        if data and self.request is None and self.head_started is None:
            self.head_started = self.arrived or time.time()  # the first head may have waited unread
            self.arrived = 0.0
        result = super().received(data)
        if self.request is None or self.request.headers_finished:
            self.head_started = None
        return result

    def stale_since(self) -> float:
        """Since when this connection has not moved on: its unfinished head's start, else its last I/O."""
        return self.head_started if self.head_started is not None else self.last_activity

    def evictable(self) -> bool:
        return not self.requests and not self.total_outbufs_len  # served or answering: kept

    arrived: float = 0.0  # when the connection was accepted (it may have waited before its channel)

    def unread(self, size: int = 1) -> bytes | None:
        """Up to ``size`` bytes the client sent that waitress has not read yet: b"" when it has closed
        its side, None when nothing waits (or the socket cannot say)."""
        try:
            return self.socket.recv(size, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:
            return None

    def sheddable(self, now: float) -> bool:
        """Safe to close for a new connection: nothing of the client's is lost or reset by it."""
        if self.requests or self.will_close:
            return False  # being served (or closing anyway)
        if self.total_outbufs_len:  # an answer still being sent: shed once the client stopped reading it
            return now - self.last_activity >= STALL_SECONDS
        if self.head_started is not None:
            return now - self.head_started >= HEAD_GRACE_SECONDS  # a slow or dribbling head
        waiting = self.unread(8192)
        if waiting:  # not read yet: a whole request head is served, a part of one is a dribble
            return b"\r\n\r\n" not in waiting and now - (self.arrived or self.creation_time) >= HEAD_GRACE_SECONDS
        return waiting is None and now - self.last_activity >= IDLE_GRACE_SECONDS

    def handle_read(self) -> None:
        super().handle_read()
        if not self.connected and isinstance(self.server, GuardedServer) and self.server.waiting:
            self.server.admit_waiting(time.time())  # the client closed: its slot is free

    def handle_close(self) -> None:
        super().handle_close()
        if isinstance(self.server, GuardedServer) and self.server.waiting:
            # its slot is free: the first waiting one gets it (closing happens in the loop's event
            # handlers, where admitting is safe; never through the trigger, whose thunks hold its lock)
            self.server.admit_waiting(time.time())


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with the limits of the module docstring."""

    channel_class = GuardedChannel
    per_address = PER_ADDRESS
    max_connections = MAX_CONNECTIONS
    head_seconds = HEAD_SECONDS
    queue_seconds = QUEUE_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.waiting: deque[tuple[socket.socket, Any, float]] = deque()  # (connection, address, since)
        self._admitting = self._scheduled = self._closed = False
        super().__init__(*args, **kwargs)

    def readable(self) -> bool:
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        if self.waiting:
            self.schedule_admission()
        return bool(self.accepting)  # never stop accepting: handle_accept queues what has no room

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
        host, now = _host(addr), time.time()
        if not self.waiting and self._make_room(host, now):
            self._open(conn, addr, now)
        else:
            mine = [entry for entry in self.waiting if _host(entry[1]) == host]
            if len(mine) >= QUEUE_PER_ADDRESS:  # the longest waiting one of this address gives way
                self.waiting.remove(mine[0])
                self._answer_busy(mine[0][0], f"{host} has {QUEUE_PER_ADDRESS} connections waiting")
            self.waiting.append((conn, addr, now))

    def schedule_admission(self) -> None:
        """Run ``admit_waiting`` ``ADMIT_EVERY_SECONDS`` from now as an event of the loop (a timer pulls
        waitress's trigger): not from ``readable``, where poll() is listing the sockets to select on,
        and soon even when no socket wakes the loop (a kept-alive connection becoming sheddable)."""
        if self._scheduled or self._closed:
            return
        self._scheduled = True

        def admit() -> None:
            self._scheduled = False
            self.admit_waiting(time.time())

        def pull() -> None:
            try:
                self.trigger.pull_trigger(admit)
            except OSError:  # the loop is ending
                self._scheduled = False

        timer = threading.Timer(ADMIT_EVERY_SECONDS, pull)
        timer.daemon = True
        timer.start()

    def admit_waiting(self, now: float) -> None:
        """Serve the waiting connections there is room for now, newest first (a burst of an attacker's
        connections does not keep the owner's later one waiting); answer those that waited
        ``queue_seconds`` with a 503. One address at its limit does not hold up another's."""
        if self._admitting or self._closed:
            return  # a shed connection's handle_close calls back here; a closed server admits nobody
        self._admitting = True
        try:
            blocked: set[str] = set()
            kept: list[tuple[socket.socket, Any, float]] = []
            for conn, addr, since in reversed(self.waiting):
                host = _host(addr)
                if host not in blocked and self._make_room(host, now):
                    self._open(conn, addr, since)
                elif now - since >= self.queue_seconds:
                    self._answer_busy(conn, f"no room for a connection from {host} within {self.queue_seconds:g} s")
                else:
                    blocked.add(host)
                    kept.append((conn, addr, since))
            self.waiting = deque(reversed(kept))
        finally:
            self._admitting = False

    def _open(self, conn: socket.socket, addr: Any, arrived: float) -> None:
        channel = self.channel_class(self, conn, addr, self.adj, map=self._map)
        channel.arrived = arrived

    def _make_room(self, host: str, now: float) -> bool:
        """True when a connection from ``host`` may be added (shedding one if need be and one may be)."""
        channels = [c for c in self._map.values() if isinstance(c, GuardedChannel) and c.connected]
        mine = [c for c in channels if _host(c.addr) == host]
        if len(mine) >= self.per_address:
            return self._shed(mine, now, f"{host} holds {len(mine)} connections")
        if len(channels) >= self.max_connections:
            busiest, _ = Counter(_host(c.addr) for c in channels).most_common(1)[0]
            why = f"the server holds {len(channels)} connections"
            return self._shed([c for c in channels if _host(c.addr) == busiest], now, why) \
                or self._shed(channels, now, why)
        return True

    @staticmethod
    def _shed(channels: list[GuardedChannel], now: float, why: str) -> bool:
        gone = next((c for c in channels if c.evictable() and c.unread() == b""), None)
        if gone is not None:  # the client closed its side; waitress has not read the EOF yet
            gone.handle_close()
            return True
        candidates = [c for c in channels if c.sheddable(now)]
        if not candidates:
            return False
        stalest = min(candidates, key=GuardedChannel.stale_since)
        log.info("%s: closing its stalest connection (from %s) for a new one", why, _host(stalest.addr))
        stalest.handle_close()
        return True

    @staticmethod
    def _answer_busy(conn: socket.socket, why: str) -> None:
        log.warning("%s: answering 503, retry after %d s", why, RETRY_AFTER_SECONDS)
        answer_busy(conn)

    def close(self) -> None:
        self._closed = True
        while self.waiting:
            self.waiting.popleft()[0].close()
        super().close()


def answer_busy(conn: socket.socket) -> None:
    """Answer ``BUSY`` on ``conn`` and close it without a reset, never blocking the loop: first drop
    what the client has sent (a socket closed with unread bytes sends a reset, and a reset makes the
    client drop the answer it has not read yet), then send the answer and end the connection."""
    try:
        conn.setblocking(False)
        _drain(conn)
        conn.send(BUSY)  # ~150 bytes: always fits a fresh socket's send buffer
        conn.shutdown(socket.SHUT_WR)
        _drain(conn)
    except OSError:
        pass
    finally:
        conn.close()


def _drain(conn: socket.socket) -> None:
    try:
        while conn.recv(65536):
            pass
    except OSError:  # nothing more has arrived (BlockingIOError), or the client is gone
        pass


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
