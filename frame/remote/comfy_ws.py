"""ComfyUI's step progress and live preview, read from its ``/ws`` websocket (optional, best effort).

ComfyUI reports a running job's steps only over its websocket (``GET /ws?clientId=...``, the
``client_id`` the job was posted with): text frames ``{"type": "progress", "data": {"value", "max",
"prompt_id", "node"}}`` and binary frames ``[event 1 (PREVIEW_IMAGE), image type 1 JPEG / 2 PNG,
image bytes]`` (big-endian 32-bit words; ``server.py``'s ``send_image``). ``ProgressListener`` reads
them in a thread and keeps the latest; the job itself never depends on it: whether the job is done
is learnt by polling ``/history``, so a proxy that refuses websockets, an https URL (not read here)
or a broken frame only costs the phone page its step count.

A client of RFC 6455's smallest useful part, with the standard library: the upgrade handshake (with
the same ``Authorization`` header as the HTTP calls), unmasked server frames up to ``MAX_FRAME``
bytes (larger ones end the listener), pings answered, nothing else sent.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import os
import socket
import struct
import threading
from urllib.parse import urlsplit

from PIL import Image

from frame import jsonlimits

log = logging.getLogger(__name__)

MAX_FRAME = 8 << 20        # a preview is a small JPEG; anything larger is not ComfyUI talking
MAX_HEADER = 16 << 10
MAX_TEXT_DEPTH, MAX_TEXT_VALUES = 16, 10_000  # ComfyUI's status messages: 4 levels, a few dozen values
READ_TIMEOUT = 1.0         # how often the reader looks at its stop flag
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PREVIEW_IMAGE = 1


class ProgressListener:
    """The latest ``(step, steps)`` and preview of ``prompt_id`` from ComfyUI's websocket."""

    def __init__(self, base_url: str, client_id: str, headers: dict[str, str], connect_timeout: float) -> None:
        self.base_url, self.client_id, self.headers = base_url, client_id, headers
        self.connect_timeout = connect_timeout
        self.prompt_id: str | None = None
        self.step, self.steps = 0, 0
        self.preview: bytes | None = None
        self.changed = False
        self.error = ""
        self._buffer = b""
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="comfyui-ws", daemon=True)

    def start(self) -> ProgressListener:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(READ_TIMEOUT + 1)

    def _run(self) -> None:
        try:
            self._sock = self._connect()
            while not self._stop.is_set():
                frame = self._frame()
                if frame is None:
                    continue
                opcode, payload = frame
                if opcode == 8:
                    return
                if opcode == 9:
                    self._send(10, payload)
                elif opcode == 1:
                    self._text(payload)
                elif opcode == 2:
                    self._binary(payload)
        except (OSError, ValueError) as exc:
            if not self._stop.is_set():
                self.error = str(exc)[:200]
                log.info("no step progress from ComfyUI's websocket (%s): polling only", self.error)
        finally:
            if self._sock is not None:
                self._sock.close()

    def _connect(self) -> socket.socket:
        parts = urlsplit(self.base_url)
        if parts.scheme != "http":
            raise ValueError(f"{parts.scheme}: websockets are read over plain http only")
        sock = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=self.connect_timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = (parts.path.rstrip("/") or "") + f"/ws?clientId={self.client_id}"
        lines = [f"GET {path} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
                 *(f"{name}: {value}" for name, value in self.headers.items())]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk or len(head) > MAX_HEADER:
                raise ValueError("no websocket handshake")
            head += chunk
        head, _, self._buffer = head.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if b" 101 " not in status + b" " or accept.encode() not in head:
            raise ValueError(f"the websocket was refused ({status.decode(errors='replace')[:80]})")
        sock.settimeout(READ_TIMEOUT)
        return sock

    def _read(self, size: int) -> bytes | None:
        """``size`` bytes, or None when the read timed out before any of them arrived (stop check)."""
        assert self._sock is not None
        while len(self._buffer) < size:
            try:
                chunk = self._sock.recv(max(65536, size - len(self._buffer)))
            except TimeoutError:
                if not self._buffer or self._stop.is_set():
                    return None
                continue
            if not chunk:
                raise ValueError("the websocket closed")
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _frame(self) -> tuple[int, bytes] | None:
        head = self._read(2)
        if head is None:
            return None
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read_all(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read_all(8))[0]
        if length > MAX_FRAME:
            raise ValueError(f"a websocket frame of {length} bytes")
        mask = self._read_all(4) if head[1] & 0x80 else b""
        payload = self._read_all(length) if length else b""
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return opcode, payload

    def _read_all(self, size: int) -> bytes:
        while True:
            data = self._read(size)
            if data is not None:
                return data
            if self._stop.is_set():
                raise ValueError("stopped")

    def _send(self, opcode: int, payload: bytes) -> None:
        """A masked frame (clients must mask): only pongs are sent."""
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload[:125]))
        assert self._sock is not None
        self._sock.sendall(bytes([0x80 | opcode, 0x80 | len(masked)]) + mask + masked)

    def _text(self, payload: bytes) -> None:
        """A status message; only ``progress`` counts. Parsed within limits (a progress message is a
        few values deep and long), so a hostile server's text frame cannot recurse or bloat the worker."""
        message = jsonlimits.loads(payload, MAX_TEXT_DEPTH, MAX_TEXT_VALUES)
        if not isinstance(message, dict) or message.get("type") != "progress":
            return
        data = message.get("data")
        if not isinstance(data, dict):
            return
        if self.prompt_id is not None and data.get("prompt_id") not in (None, self.prompt_id):
            return  # someone else's job
        value, most = data.get("value"), data.get("max")
        if isinstance(value, int) and isinstance(most, int) and 0 <= value <= most:
            self.step, self.steps, self.changed = value, most, True

    def _binary(self, payload: bytes) -> None:
        """A live preview, kept once this job's progress has been seen (previews name no job)."""
        if not self.steps or len(payload) < 8 or struct.unpack(">I", payload[:4])[0] != PREVIEW_IMAGE:
            return
        try:
            with Image.open(io.BytesIO(payload[8:])) as image:
                if image.width * image.height > 1024 * 1024:
                    return
                buffer = io.BytesIO()
                image.convert("RGB").save(buffer, format="PNG")
        except (OSError, ValueError, Image.DecompressionBombError):
            return
        self.preview = buffer.getvalue()
