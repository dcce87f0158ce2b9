"""A real HTTP server on 127.0.0.1 whose routes misbehave on purpose (garbage, 500, huge bodies,
slow drips, wrong content types), for the feed and daemon tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Route = Callable[[BaseHTTPRequestHandler], None]


def reply(body: bytes, content_type: str = "application/json", status: int = 200,
          headers: dict | None = None) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(body)
    return route


def huge(total: int, declare_length: bool) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if declare_length:
            handler.send_header("Content-Length", str(total))
        handler.send_header("Connection", "close")
        handler.end_headers()
        chunk = b"x" * 65536
        sent = 0
        try:
            while sent < total:
                handler.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return route


def drip(interval: float, count: int) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(count))
        handler.end_headers()
        try:
            for _ in range(count):
                handler.wfile.write(b"a")
                handler.wfile.flush()
                time.sleep(interval)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return route


def redirect(location: str, status: int = 302) -> Route:
    return reply(b"", "text/plain", status, headers={"Location": location})


def drip_headers(interval: float, body: bytes = b"", content_type: str = "text/plain") -> Route:
    """Status line and headers one byte per ``interval`` (each socket read gets a byte long before any
    read timeout), then ``body`` at once."""
    def route(handler: BaseHTTPRequestHandler) -> None:
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "X-Padding: slow-slow-slow-slow-slow\r\n\r\n").encode()
        try:
            for byte in head:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(interval)
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        handler.close_connection = True
    return route


class FeedServer:
    """``server.routes[path] = route``; ``server.url(path)``; ``server.hits[path]`` counts requests and
    ``server.last_headers[path]`` keeps the last request headers."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: dict[str, int] = {}
        self.last_headers: dict[str, dict] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                owner.hits[self.path] = owner.hits.get(self.path, 0) + 1
                owner.last_headers[self.path] = dict(self.headers)
                route = owner.routes.get(self.path)
                if route is None:
                    reply(b"not found", "text/plain", 404)(self)
                else:
                    route(self)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
