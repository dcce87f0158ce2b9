"""A ComfyUI server on 127.0.0.1 for tests: ComfyUI's own routes, JSON shapes and error answers, with
a stub node set that paints a gradient instead of running a model — or fails on purpose.

It follows ComfyUI's ``server.py`` (``PromptServer``'s routes: ``POST /prompt``, ``GET /history/{id}``,
``GET``/``POST /queue``, ``GET /view``, ``POST /upload/image``, ``POST /interrupt``, ``GET /object_info/
{class}``) and ``execution.py`` (``validate_prompt``/``validate_inputs``: the 400 answer ``{"error":
{"type", "message", "details", "extra_info"}, "node_errors": {...}}`` with ComfyUI's error types; the
history entry ``{"prompt", "outputs", "status": {"status_str", "completed", "messages"}, "meta"}``
that ``PromptQueue.task_done`` writes). docs/render-anywhere.md says which version. Jobs run one at a
time in a worker thread, like ComfyUI's ``prompt_worker``. ComfyUI's own server is tested in
``test_real_comfyui.py`` (opt-in, it needs torch); this one is for the main suite without torch and for
the faults a real server cannot be made to show on demand.

``FakeComfyUI(mode=...)``: "ok"; faults "slow-view" (the picture dripped), "error" (the sampler raises,
as CUDA out of memory does), "truncated-png", "wrong-size", "huge" (a 10000×10000 picture), "die" (the
server process stops mid-job: connections refused from then on), "vanish" (nothing answers any more),
"restart" (the server forgets its queue and history mid-job), "not-json" (``/history`` answers HTML),
"deep-history" (``/history`` nested 50,000 levels), "bloated-history" (20 MB of empty objects, under
the size cap), "huge-history" (a 60 MB answer); ``HOSTILE_HISTORY`` holds those answers, made once.
Everything it received is in ``requests`` (method, path, headers, JSON body or form field names).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import io
import json
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from PIL import Image

from tests.remote.fake_a1111 import gradient_png, local_server, png_of
from tests.remote.fake_websocket import WebSocketPush

CHECKPOINTS = ["dreamshaper_8.safetensors", "sd_xl_base_1.0.safetensors"]
SAMPLERS = ["euler", "euler_ancestral", "heun", "dpm_2", "dpmpp_2m", "dpmpp_sde", "ddim", "lcm", "uni_pc"]
SCHEDULERS = ["normal", "karras", "exponential", "sgm_uniform", "simple", "ddim_uniform", "beta"]
INT_MAX = 0xFFFFFFFFFFFFFFFF

# class_type: (required inputs {name: (type or choice list, limits)}, RETURN_TYPES, OUTPUT_NODE) — ComfyUI's nodes.py
NODES = {
    "CheckpointLoaderSimple": ({"ckpt_name": (CHECKPOINTS, {})}, ("MODEL", "CLIP", "VAE"), False),
    "EmptyLatentImage": ({"width": ("INT", {"min": 16, "max": 16384}), "height": ("INT", {"min": 16, "max": 16384}),
                          "batch_size": ("INT", {"min": 1, "max": 4096})}, ("LATENT",), False),
    "CLIPTextEncode": ({"text": ("STRING", {}), "clip": ("CLIP", {})}, ("CONDITIONING",), False),
    "KSampler": ({"model": ("MODEL", {}), "seed": ("INT", {"min": 0, "max": INT_MAX}),
                  "steps": ("INT", {"min": 1, "max": 10000}), "cfg": ("FLOAT", {"min": 0.0, "max": 100.0}),
                  "sampler_name": (SAMPLERS, {}), "scheduler": (SCHEDULERS, {}), "positive": ("CONDITIONING", {}),
                  "negative": ("CONDITIONING", {}), "latent_image": ("LATENT", {}),
                  "denoise": ("FLOAT", {"min": 0.0, "max": 1.0})}, ("LATENT",), False),
    "VAEDecode": ({"samples": ("LATENT", {}), "vae": ("VAE", {})}, ("IMAGE",), False),
    "VAEEncode": ({"pixels": ("IMAGE", {}), "vae": ("VAE", {})}, ("LATENT",), False),
    "LoadImage": ({"image": ("UPLOADED", {})}, ("IMAGE", "MASK"), False),
    "SaveImage": ({"images": ("IMAGE", {}), "filename_prefix": ("STRING", {})}, (), True),
}


HOSTILE_HISTORY = {"deep-history": lambda: b'{"x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                   "bloated-history": lambda: b"[" + b"{}," * ((20 << 20) // 3) + b"{}]",
                   "huge-history": lambda: b'{"x": "' + b"a" * (60 << 20) + b'"}'}
_HOSTILE: dict[str, bytes] = {}


def hostile_history(mode: str) -> bytes:
    """The answer of a hostile mode, made once per test process (a full slice of it is the same object)."""
    if mode not in _HOSTILE:
        _HOSTILE[mode] = HOSTILE_HISTORY[mode]()
    return _HOSTILE[mode]


def _error(kind: str, message: str, details: str, **extra) -> dict:
    return {"type": kind, "message": message, "details": details, "extra_info": extra}


class FakeComfyUI(WebSocketPush):
    def __init__(self, mode: str = "ok", job_seconds: float = 0.4, token: str = "", user: str = "",
                 password: str = "", drip_seconds: float = 0.2) -> None:
        self.mode, self.job_seconds, self.drip_seconds = mode, job_seconds, drip_seconds
        self.token, self.user, self.password = token, user, password
        self.requests: list[tuple[str, str, dict, object]] = []
        self.files: dict[tuple[str, str], bytes] = {}  # (type, name) -> bytes: "input" uploads, "output" pictures
        self.history: dict[str, dict] = {}
        self.prompt_ids: list[str] = []  # every job accepted, in order
        self.sockets: dict[str, BaseHTTPRequestHandler] = {}  # /ws?clientId= -> its connection
        self.queue: list[tuple[int, str, dict, dict, list]] = []
        self.running: tuple | None = None
        self.number = 0
        self.lock = threading.Condition()
        self.interrupted = threading.Event()
        self.stop = threading.Event()
        self.server = local_server(self.handle)
        self.threads = [threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True),
                        threading.Thread(target=self._worker, daemon=True)]
        self.port = self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeComfyUI:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.interrupted.set()
        with self.lock:
            self.lock.notify_all()
        self._close()

    def _close(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            server.shutdown()
            server.server_close()

    def posts(self, path: str) -> list:
        return [body for method, p, _, body in self.requests if (method, p) == ("POST", path)]

    # routes ----------------------------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        kind = handler.headers.get("Content-Type", "")
        form = self._form(kind, raw) if kind.startswith("multipart/form-data") else None
        body = None if form is not None or not raw else json.loads(raw)
        self.requests.append((method, path, dict(handler.headers), sorted(form) if form is not None else body))
        if self.mode == "vanish" and self.running is not None:
            self.stop.wait(30)
            return
        if not self._authorised(handler):
            return self.send(handler, 401, b"401: Unauthorized", "text/plain")
        if (method, path) == ("GET", "/ws") and handler.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket(handler, query.get("clientId") or uuid.uuid4().hex)
        if (method, path) == ("GET", "/object_info/CheckpointLoaderSimple"):
            return self.send_json(handler, 200, {"CheckpointLoaderSimple": {
                "input": {"required": {"ckpt_name": [CHECKPOINTS, {"tooltip": "The name of the checkpoint"}]}},
                "output": ["MODEL", "CLIP", "VAE"], "name": "CheckpointLoaderSimple", "output_node": False}})
        if (method, path) == ("POST", "/prompt"):
            return self.post_prompt(handler, body)
        if method == "GET" and path.startswith("/history/"):
            if self.mode == "not-json":
                return self.send(handler, 200, b"<html>ComfyUI</html>", "text/html")
            if self.mode in HOSTILE_HISTORY:
                return self.send(handler, 200, hostile_history(self.mode), "application/json")
            prompt_id = path[len("/history/"):]
            with self.lock:
                entry = self.history.get(prompt_id)
            return self.send_json(handler, 200, {prompt_id: entry} if entry else {})
        if path == "/queue":
            with self.lock:
                if method == "POST":
                    deleted = set((body or {}).get("delete") or [])
                    self.queue = [item for item in self.queue if item[1] not in deleted]
                    return self.send(handler, 200, b"", "text/plain")
                running = [list(self.running)] if self.running else []
                return self.send_json(handler, 200, {"queue_running": running,
                                                     "queue_pending": [list(item) for item in self.queue]})
        if (method, path) == ("POST", "/interrupt"):
            wanted = (body or {}).get("prompt_id")
            if self.running and (wanted is None or wanted == self.running[1]):
                self.interrupted.set()
            return self.send(handler, 200, b"", "text/plain")
        if (method, path) == ("POST", "/upload/image") and form is not None:
            return self.upload(handler, form)
        if (method, path) == ("GET", "/view"):
            return self.view(handler, query)
        self.send(handler, 404, b"404: Not Found", "text/plain")

    def post_prompt(self, handler, body) -> None:
        if not isinstance(body, dict) or "prompt" not in body:
            return self.send_json(handler, 400, {"error": _error("no_prompt", "No prompt provided",
                                                                 "No prompt provided"), "node_errors": {}})
        prompt = body["prompt"]
        error, node_errors, outputs = self.validate(prompt)
        if error:
            return self.send_json(handler, 400, {"error": error, "node_errors": node_errors})
        prompt_id = str(body.get("prompt_id") or uuid.uuid4())
        self.prompt_ids.append(prompt_id)
        with self.lock:
            number = self.number
            self.number += 1
            extra = {"client_id": body["client_id"]} if "client_id" in body else {}
            self.queue.append((number, prompt_id, prompt, extra, outputs))
            self.lock.notify_all()
        self.send_json(handler, 200, {"prompt_id": prompt_id, "number": number, "node_errors": {}})

    def validate(self, prompt: dict) -> tuple[dict | None, dict, list]:
        """ComfyUI's validate_prompt over the stub nodes: the same error types and answer shape."""
        for node_id, node in prompt.items():
            if not isinstance(node, dict) or node.get("class_type") not in NODES:
                name = node.get("class_type") if isinstance(node, dict) else None
                return _error("invalid_prompt", f"Cannot execute because node {name} does not exist.",
                              f"Node ID '#{node_id}'"), {}, []
        outputs = [node_id for node_id, node in prompt.items() if NODES[node["class_type"]][2]]
        if not outputs:
            return _error("prompt_no_outputs", "Prompt has no outputs", ""), {}, []
        node_errors = {}
        for node_id, node in prompt.items():
            reasons = self.validate_inputs(prompt, node)
            if reasons:
                node_errors[node_id] = {"errors": reasons, "dependent_outputs": outputs,
                                        "class_type": node["class_type"]}
        if node_errors:  # like ComfyUI, details are the output nodes' own reasons: the rest only in node_errors
            details = "\n".join(f"{r['message']}: {r['details']}" for node_id in outputs
                                 for r in (node_errors.get(node_id) or {}).get("errors", []))
            return _error("prompt_outputs_failed_validation", "Prompt outputs failed validation", details), \
                node_errors, []
        return None, {}, outputs

    def validate_inputs(self, prompt: dict, node: dict) -> list[dict]:
        reasons = []
        inputs = node.get("inputs") or {}
        for name, (kind, limits) in NODES[node["class_type"]][0].items():
            if name not in inputs:
                reasons.append(_error("required_input_missing", "Required input is missing", name, input_name=name))
                continue
            value = inputs[name]
            if isinstance(value, list):
                linked = prompt.get(value[0], {}).get("class_type")
                returned = NODES.get(linked, ({}, ()))[1]
                if len(value) != 2 or value[1] >= len(returned) or returned[value[1]] != kind:
                    reasons.append(_error("return_type_mismatch", "Return type mismatch between linked nodes",
                                          f"{name}, received_type({returned}) mismatch input_type({kind})"))
                continue
            if isinstance(kind, list) and value not in kind:
                reasons.append(_error("value_not_in_list", "Value not in list", f"{name}: '{value}' not in {kind}"))
            elif kind == "UPLOADED" and ("input", value) not in self.files:
                reasons.append(_error("custom_validation_failed", "Custom validation failed for node",
                                      f"image - Invalid image file: {value}"))
            elif kind in ("INT", "FLOAT"):
                try:
                    number = int(value) if kind == "INT" else float(value)
                except (TypeError, ValueError) as exc:
                    reasons.append(_error("invalid_input_type", f"Failed to convert an input value to a {kind} value",
                                          f"{name}, {value}, {exc}"))
                    continue
                if "min" in limits and number < limits["min"]:
                    reasons.append(_error("value_smaller_than_min", f"Value {number} smaller than min of "
                                                                    f"{limits['min']}", name))
                if "max" in limits and number > limits["max"]:
                    reasons.append(_error("value_bigger_than_max", f"Value {number} bigger than max of "
                                                                   f"{limits['max']}", name))
        return reasons

    def upload(self, handler, form: dict) -> None:
        name, data = form.get("image", (None, b""))
        if not name:
            return self.send(handler, 400, b"", "text/plain")
        kind = form.get("type", (None, b"input"))[1].decode() or "input"
        self.files[(kind, name)] = data
        self.send_json(handler, 200, {"name": name, "subfolder": "", "type": kind})

    def view(self, handler, query: dict) -> None:
        filename = query.get("filename", "")
        if not filename or filename[0] == "/" or ".." in filename:
            return self.send(handler, 400, b"", "text/plain")
        data = self.files.get((query.get("type", "output"), filename))
        if data is None:
            return self.send(handler, 404, b"404: Not Found", "text/plain")
        self.send(handler, 200, data, "image/png", drip=self.mode == "slow-view")

    # execution -------------------------------------------------------------------------------------

    def _worker(self) -> None:
        """ComfyUI's prompt_worker: one job at a time, its history entry written when it ends."""
        while not self.stop.is_set():
            with self.lock:
                while not self.queue and not self.stop.is_set():
                    self.lock.wait(0.1)
                if self.stop.is_set():
                    return
                self.queue.sort(key=lambda item: item[0])
                self.running = self.queue.pop(0)
            self.interrupted.clear()
            number, prompt_id, prompt, extra, outputs = self.running
            if self.mode in ("die", "vanish", "restart"):
                time.sleep(self.job_seconds / 2)
                if self.mode == "die":
                    self._close()  # the process is gone: nothing listens any more
                    return
                if self.mode == "restart":
                    with self.lock:
                        self.running, self.queue, self.history = None, [], {}
                    continue
                self.stop.wait(30)
                return
            interrupted = self.paint(prompt_id, prompt, extra.get("client_id"))
            if self.stop.is_set():
                return
            entry = self.execute(prompt_id, prompt, outputs, interrupted)
            entry["prompt"] = [number, prompt_id, prompt, extra, outputs]
            with self.lock:
                self.history[prompt_id] = entry
                self.running = None

    def paint(self, prompt_id: str, prompt: dict, client_id: str | None) -> bool:
        """The sampler's steps over job_seconds, each sent to the job's websocket as ComfyUI does
        (``progress`` text, then a PREVIEW_IMAGE binary frame); True when interrupted."""
        sampler = [node for node in prompt.values() if node.get("class_type") == "KSampler"]
        steps = int(sampler[0]["inputs"]["steps"]) if sampler else 1
        for step in range(1, steps + 1):
            if self.interrupted.wait(self.job_seconds / steps):
                return True
            self.ws_send(client_id, 0x81, json.dumps({"type": "progress", "data": {
                "value": step, "max": steps, "prompt_id": prompt_id, "node": "3"}}).encode())
            preview = io.BytesIO()
            Image.new("RGB", (64, 40), (step * 9 % 256, 80, 160)).save(preview, format="JPEG")
            self.ws_send(client_id, 0x82, struct.pack(">II", 1, 1) + preview.getvalue())
        return False

    def execute(self, prompt_id: str, prompt: dict, outputs: list, interrupted: bool) -> dict:
        start = ["execution_start", {"prompt_id": prompt_id, "timestamp": int(time.time() * 1000)}]
        cached = ["execution_cached", {"nodes": [], "prompt_id": prompt_id, "timestamp": int(time.time() * 1000)}]
        sampler = next(node_id for node_id, node in prompt.items() if node["class_type"] == "KSampler")
        if interrupted or self.mode == "error":
            event = "execution_interrupted" if interrupted else "execution_error"
            data = {"prompt_id": prompt_id, "node_id": sampler, "node_type": "KSampler", "executed": ["4", "6", "7"]}
            if not interrupted:
                data.update(exception_message="CUDA out of memory. Tried to allocate 2.00 GiB",
                            exception_type="torch.OutOfMemoryError", traceback=["..."], current_inputs={},
                            current_outputs={})
            return {"outputs": {}, "status": {"status_str": "error", "completed": False,
                                              "messages": [start, cached, [event, data]]}, "meta": {}}
        width, height = self.size_of(prompt, sampler)
        png = gradient_png(width // 2 if self.mode == "wrong-size" else width, height)
        if self.mode == "truncated-png":
            png = png[: len(png) * 2 // 3]
        if self.mode == "huge":
            png = png_of(10000, 10000)
        filename = f"frame_{len(self.history) + 1:05d}_.png"
        self.files[("output", filename)] = png
        images = {"images": [{"filename": filename, "subfolder": "", "type": "output"}]}
        success = ["execution_success", {"prompt_id": prompt_id, "timestamp": int(time.time() * 1000)}]
        return {"outputs": {node_id: images for node_id in outputs},
                "status": {"status_str": "success", "completed": True, "messages": [start, cached, success]},
                "meta": {node_id: {"node_id": node_id, "display_node": node_id, "parent_node": None,
                                   "real_node_id": node_id} for node_id in outputs}}

    def size_of(self, prompt: dict, sampler: str) -> tuple[int, int]:
        latent = prompt[prompt[sampler]["inputs"]["latent_image"][0]]
        if latent["class_type"] == "EmptyLatentImage":
            return int(latent["inputs"]["width"]), int(latent["inputs"]["height"])
        source = prompt[latent["inputs"]["pixels"][0]]  # VAEEncode <- LoadImage
        return Image.open(io.BytesIO(self.files[("input", source["inputs"]["image"])])).size

    # HTTP ------------------------------------------------------------------------------------------

    def _authorised(self, handler) -> bool:
        given = handler.headers.get("Authorization", "")
        if self.token:
            return given == f"Bearer {self.token}"
        if self.user:
            return given == "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return True

    @staticmethod
    def _form(kind: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {kind}\r\n\r\n".encode() + raw)
        return {part.get_param("name", header="content-disposition"): (part.get_filename(),
                                                                          part.get_payload(decode=True))
                for part in message.iter_parts()}

    def send_json(self, handler, status: int, data: object) -> None:
        self.send(handler, status, json.dumps(data).encode(), "application/json")

    def send(self, handler, status: int, data: bytes, kind: str, drip: bool = False) -> None:
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
                "Connection: close\r\n\r\n").encode()
        handler.close_connection = True
        try:
            handler.wfile.write(head)
            for i in range(0, len(data), 4 if drip else max(1, len(data))):
                if self.stop.is_set():
                    return
                handler.wfile.write(data[i:i + (4 if drip else len(data))])
                handler.wfile.flush()
                if drip:
                    time.sleep(self.drip_seconds)
        except OSError:
            pass
