"""A fake AUTOMATIC1111 API server on 127.0.0.1 that answers like A1111 or fails on purpose.

``FakeA1111(mode=...)``: "ok" paints a gradient of the asked size and answers with A1111's JSON
(``images``, ``parameters``, ``info`` as a JSON string with ``infotexts``); the faults are

* "slow-headers" / "slow-body": the answer dripped a few bytes a second (headers or body);
* "500" / "422": an error answer with A1111's ``{"error", "detail"}`` JSON;
* "truncated-png": a whole HTTP answer whose PNG is cut short; "wrong-size": a picture half as wide;
* "die": the connection is reset mid-job (the server process killed); "vanish": nothing answers
  any more, progress polls included (a desktop switched off: no reset reaches the frame);
* "not-json": an HTML page with status 200.

``POST /sdapi/v1/interrupt`` ends the running job early (A1111 then answers with what it has).

Everything it received is in ``requests`` (method, path, headers, JSON body).
"""

from __future__ import annotations

import base64
import io
import json
import socket
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image, PngImagePlugin

INFOTEXT = ("{prompt}\nNegative prompt: {negative}\nSteps: {steps}, Sampler: {sampler}, Schedule type: {schedule}, "
            "CFG scale: {cfg}, Seed: {seed}, Size: {width}x{height}, Model hash: 879db523c3, Model: dreamshaper_8, "
            "Version: v1.10.1")


def gradient_png(width: int, height: int, text: str = "") -> bytes:
    image = Image.new("RGB", (width, height))
    image.putdata([(x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), 128)
                   for y in range(height) for x in range(width)])
    info = PngImagePlugin.PngInfo()
    if text:
        info.add_text("parameters", text)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_of(width: int, height: int, rows: int | None = None) -> bytes:
    """A valid RGB PNG of ``width`` × ``height`` black pixels, compressed in one stream (a 10000² one is
    ~300 KB: what a decompression bomb looks like on the wire)."""
    packer = zlib.compressobj(9)
    row = b"\0" * (1 + 3 * width)
    body = b"".join(packer.compress(row) for _ in range(height if rows is None else rows)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


def split_sampler(name: str) -> tuple[str, str]:
    """A requested sampler as A1111 1.9+ reports it: "DPM++ 2M Karras" → ("DPM++ 2M", "Karras"),
    "Euler a" → ("Euler a", "Automatic")."""
    if name.endswith(" Karras"):
        return name[: -len(" Karras")], "Karras"
    return name, "Automatic"


class FakeA1111:
    def __init__(self, mode: str = "ok", job_seconds: float = 0.4, user: str = "", password: str = "",
                 token: str = "", drip_seconds: float = 0.2, hold: threading.Event | None = None) -> None:
        self.mode, self.job_seconds, self.drip_seconds = mode, job_seconds, drip_seconds
        self.hold = hold  # when given, a job answers only once it is set (a test saw what it waits for)
        self.user, self.password, self.token = user, password, token
        self.requests: list[tuple[str, str, dict, object]] = []
        self.job_started: float | None = None
        self.job_steps = 25  # the running job's steps, as its progress reports them
        self.stop = threading.Event()
        self.interrupted = threading.Event()  # POST /sdapi/v1/interrupt ends the running job early
        self.server = local_server(self.handle)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeA1111:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.interrupted.set()
        self.server.shutdown()
        self.server.server_close()

    # ---------------------------------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length)) if length else None
        path = handler.path.split("?")[0]
        self.requests.append((method, path, dict(handler.headers), body))
        if self.mode == "vanish" and self.job_started is not None:
            self.stop.wait(30)  # never answers again
            return
        if not self._authorised(handler):
            return self.send_json(handler, 401, {"detail": "Incorrect username or password"})
        if path == "/sdapi/v1/sd-models":
            return self.send_json(handler, 200, [{"title": "dreamshaper_8.safetensors [879db523c3]",
                                                  "model_name": "dreamshaper_8", "hash": "879db523c3",
                                                  "sha256": None, "filename": "/models/dreamshaper_8.safetensors",
                                                  "config": None}])
        if path == "/sdapi/v1/progress":
            return self.send_json(handler, 200, self.progress())
        if path == "/sdapi/v1/interrupt" and method == "POST":
            self.interrupted.set()
            return self.send_json(handler, 200, {})
        if path in ("/sdapi/v1/txt2img", "/sdapi/v1/img2img") and method == "POST":
            return self.job(handler, body)
        self.send_json(handler, 404, {"detail": "Not Found"})

    def _authorised(self, handler: BaseHTTPRequestHandler) -> bool:
        given = handler.headers.get("Authorization", "")
        if self.token:
            return given == f"Bearer {self.token}"
        if self.user:
            expected = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            return given == f"Basic {expected}"
        return True

    def progress(self) -> dict:
        if self.job_started is None:
            return {"progress": 0, "eta_relative": 0, "state": {"job_count": 0, "sampling_step": 0,
                                                                "sampling_steps": 0}, "current_image": None}
        elapsed = time.monotonic() - self.job_started
        fraction = min(0.99, elapsed / self.job_seconds)
        preview = base64.b64encode(gradient_png(64, 40)).decode()
        return {"progress": fraction, "eta_relative": max(0.0, self.job_seconds - elapsed),
                "state": {"skipped": False, "interrupted": False, "job": "txt2img", "job_count": 1, "job_no": 0,
                          "sampling_step": int(fraction * self.job_steps), "sampling_steps": self.job_steps},
                "current_image": preview, "textinfo": None}

    def job(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        self.job_steps = int(body.get("steps", 20))
        self.job_started = time.monotonic()
        if self.mode in ("die", "vanish"):
            self.stop.wait(self.job_seconds)
            if self.mode == "vanish":
                self.stop.wait(30)
                return
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.close_connection = True
            handler.connection.close()  # RST: the server process died
            return
        self.interrupted.clear()
        self.interrupted.wait(self.job_seconds)
        if self.hold is not None:
            self.hold.wait(60)
        self.job_started = None
        if self.mode in ("500", "422"):
            status = int(self.mode)
            return self.send_json(handler, status, {"error": "OutOfMemoryError" if status == 500 else "ValidationError",
                                                    "detail": "CUDA out of memory" if status == 500
                                                    else "sampler_name: unknown sampler", "body": "", "errors": ""})
        if self.mode == "not-json":
            return self.send(handler, 200, b"<html><body>Stable Diffusion</body></html>", "text/html")
        width, height = int(body.get("width", 512)), int(body.get("height", 512))
        sampler, schedule = split_sampler(body.get("sampler_name", "Euler"))
        text = INFOTEXT.format(prompt=body.get("prompt", ""), negative=body.get("negative_prompt", ""),
                               sampler=sampler, schedule=schedule,
                               steps=body.get("steps", 20), cfg=body.get("cfg_scale", 7), seed=body.get("seed", -1),
                               width=width, height=height)
        png = gradient_png(width // 2 if self.mode == "wrong-size" else width, height, text)
        if self.mode == "truncated-png":
            png = png[: len(png) * 2 // 3]
        info = {"prompt": body.get("prompt"), "all_prompts": [body.get("prompt")],
                "negative_prompt": body.get("negative_prompt"), "seed": body.get("seed"),
                "all_seeds": [body.get("seed")], "subseed": 1, "width": width, "height": height,
                "sampler_name": sampler, "cfg_scale": body.get("cfg_scale"), "steps": body.get("steps"),
                "batch_size": 1, "sd_model_name": "dreamshaper_8", "sd_model_hash": "879db523c3",
                "denoising_strength": body.get("denoising_strength"), "infotexts": [text]}
        self.send_json(handler, 200, {"images": [base64.b64encode(png).decode()], "parameters": body,
                                      "info": json.dumps(info)})

    def send_json(self, handler: BaseHTTPRequestHandler, status: int, data: object) -> None:
        self.send(handler, status, json.dumps(data).encode(), "application/json")

    def send(self, handler: BaseHTTPRequestHandler, status: int, data: bytes, kind: str) -> None:
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
                "Connection: close\r\n\r\n").encode()
        handler.close_connection = True
        try:
            if self.mode == "slow-headers" and status == 200 and data.startswith(b"{\"images\""):
                self._drip(handler, head)
                handler.wfile.write(data)
            elif self.mode == "slow-body" and status == 200 and data.startswith(b"{\"images\""):
                handler.wfile.write(head)
                self._drip(handler, data)
            else:
                handler.wfile.write(head + data)
            handler.wfile.flush()
        except OSError:
            pass  # the client gave up

    def _drip(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        for i in range(0, len(data), 4):
            if self.stop.is_set():
                return
            handler.wfile.write(data[i:i + 4])
            handler.wfile.flush()
            time.sleep(self.drip_seconds)


def local_server(handle) -> ThreadingHTTPServer:
    """A quiet HTTP/1.1 server on a free port of 127.0.0.1 that hands every GET and POST to
    ``handle(request, method)`` (both fake servers answer this way); not started yet."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            handle(self, "GET")

        def do_POST(self):
            handle(self, "POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    return server
