"""A real threaded HTTP server on 127.0.0.1 serving a folder with Range support and fault injection.

``faults`` is a list of actions consumed one per GET request (first in, first out): "ok" (no
fault), "500" (an HTTP 500), "429" (Too Many Requests, Retry-After: 0.2), "drop" (close the
connection without answering), "truncate" (headers promise the full range, half the body is sent,
connection closed), "ignore_range" (200 with the whole file).

``gate`` (optional) is asked before every request, with the path, for an outage that lasts as long as
it says: "hang" (accept, answer nothing for ``hang_seconds``, close: a NAS still spinning up, a request
that times out) or "drop" (close at once: the network is gone); None serves normally. ``refused``
counts the requests a gate turned away.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the engine's sessions expect
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK stalls)

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _outage(self) -> bool:
        """Apply the server's gate; True when this request was turned away."""
        server: RangeServer = self.server.owner
        outage = server.gate(self.path) if server.gate is not None else None
        if outage is None:
            return False
        server.note_refused()
        if outage == "hang":
            time.sleep(server.hang_seconds)
        self.close_connection = True
        self.connection.shutdown(2)
        return True

    def do_HEAD(self) -> None:  # noqa: N802 (http.server naming)
        server: RangeServer = self.server.owner
        server.record(f"HEAD {self.path}", None)
        if self._outage():
            return
        path = os.path.join(server.root, self.path.lstrip("/").split("?")[0])
        if not os.path.isfile(path):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        server: RangeServer = self.server.owner
        server.record(self.path, self.headers.get("Range"))
        if self._outage():
            return
        path = os.path.join(server.root, self.path.lstrip("/").split("?")[0])
        if not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        fault = server.next_fault()
        if fault == "500":
            self.send_error(500)
            return
        if fault == "429":
            self.send_response(429)
            self.send_header("Retry-After", "0.2")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        match = _RANGE.match(self.headers.get("Range", ""))
        if fault == "ignore_range" or match is None:
            self._send(200, data, {})
            return
        start = int(match.group(1))
        end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
        if start >= len(data):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:end + 1]
        headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
        if fault == "truncate":
            self._send(206, body, headers, cut=len(body) // 2)
            return
        self._send(206, body, headers)

    def _send(self, status: int, body: bytes, headers: dict, cut: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        for key, val in headers.items():
            self.send_header(key, val)
        self.end_headers()
        if cut is None:
            self.wfile.write(body)
        else:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """Injected faults make clients hang up mid-answer; that is expected, not worth a traceback."""


class RangeServer:
    """Start with ``start()``; ``url(relative)`` gives a file's URL; ``requests`` logs (path, Range)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.faults: list[str] = []
        self.requests: list[tuple[str, str | None]] = []
        self.gate: Callable[[str], str | None] | None = None
        self.hang_seconds = 0.5
        self.refused = 0
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> RangeServer:
        self._thread.start()
        return self

    def url(self, relative: str) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/{relative}"

    def record(self, path: str, range_header: str | None) -> None:
        with self._lock:
            self.requests.append((path, range_header))

    def note_refused(self) -> None:
        with self._lock:
            self.refused += 1

    def next_fault(self) -> str | None:
        with self._lock:
            return self.faults.pop(0) if self.faults else None

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
