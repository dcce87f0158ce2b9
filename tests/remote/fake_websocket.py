"""The websocket half of the ComfyUI test server: ``server.py``'s ``/ws`` — one connection per
``clientId`` after the RFC 6455 upgrade, frames pushed to it (``progress`` text frames, PREVIEW_IMAGE
binary frames), nothing read but the client's pongs and close."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from http.server import BaseHTTPRequestHandler


class WebSocketPush:
    """Mixed into FakeComfyUI, which provides ``stop``, ``queue`` and ``sockets``."""

    stop: threading.Event
    queue: list
    sockets: dict[str, BaseHTTPRequestHandler]

    def websocket(self, handler, client_id: str) -> None:
        key = handler.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode())
                                  .digest()).decode()
        handler.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        handler.wfile.flush()
        handler.ws_lock = threading.Lock()
        self.sockets[client_id] = handler
        self.ws_send(client_id, 0x81, json.dumps({"type": "status", "data": {
            "status": {"exec_info": {"queue_remaining": len(self.queue)}}, "sid": client_id}}).encode())
        handler.close_connection = True
        handler.ws_received = b""
        try:
            while not self.stop.is_set():
                data = handler.rfile.read(1)  # the client sends only pongs and its close
                if not data:
                    break
                handler.ws_received += data
        except OSError:
            pass
        finally:
            self.sockets.pop(client_id, None)

    def ws_send(self, client_id: str | None, first_byte: int, payload: bytes) -> None:
        handler = self.sockets.get(client_id or "")
        if handler is None:
            return
        size = len(payload)
        head = bytes([first_byte, size]) if size < 126 else bytes([first_byte, 126]) + struct.pack(">H", size)
        try:
            with handler.ws_lock:
                handler.wfile.write(head + payload)
                handler.wfile.flush()
        except (OSError, ValueError):  # ValueError: the client read the frame and hung up before the flush
            self.sockets.pop(client_id or "", None)

