"""One night's picture from a ComfyUI server: ``render_comfyui(settings, job, progress)``.

The same contract as ``frame.remote.render`` (the AUTOMATIC1111 client): a ``RemoteResult`` or
``RemoteUnavailable`` with the reason the render worker's fallback reports. The steps:

1. ``GET /object_info/CheckpointLoaderSimple`` — reachable, credentials accepted, the checkpoints
   (``{{checkpoint}}`` is ``render.remote.checkpoint`` or the first one listed);
2. image-to-image only: ``POST /upload/image`` with the picture fitted to the job's size (ComfyUI
   paints at the size LoadImage reads), named for ``{{image}}``;
3. ``POST /prompt`` with the filled workflow and a ``client_id``: the ``prompt_id`` (a workflow ComfyUI
   refuses is HTTP 400: ``rejected``, with its reasons);
4. every ``poll_seconds`` ``GET /history/{prompt_id}`` until the job is there, and while it is not,
   ``GET /queue`` for its place (a job the server no longer knows — it was restarted — is ``died``,
   and so is a server refusing connections mid-job); each poll relays the step and preview that
   ComfyUI's websocket reported last (``comfy_ws``, opened before the job is posted; the phone page's
   only use of it);
5. ``GET /view`` of its first picture, read with the client's size cap, checked from its header for
   the size asked for before it is decoded.

Every call runs under what is left of the job's deadline (``job_timeout_minutes`` or the caller's
render window); a job given up there, or a stopped worker's, is deleted from ComfyUI's queue or
interrupted (``POST /interrupt`` with its ``prompt_id``, sent only while it is the one running).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import time
import uuid
from typing import TYPE_CHECKING, Any

from frame.remote import comfyui
from frame.remote.a1111 import RemoteJob
from frame.remote.client import A1111Client
from frame.remote.comfy_ws import ProgressListener
from frame.remote.errors import DIED, NOT_CONFIGURED, REFUSED, REJECTED, TIMEOUT, RemoteUnavailable
from frame.remote.picture import check_picture, init_picture_png
from frame.remote.render import (
    CHECK_SECONDS,
    INTERRUPT_SECONDS,
    POLL_CALL_SECONDS,
    ProgressCallback,
    RemoteProgress,
    RemoteResult,
    job_budget,
    not_done_in_time,
    server_gone,
)

if TYPE_CHECKING:
    from frame.config.schema import RemoteRenderConfig

log = logging.getLogger(__name__)

API_HINT = "a ComfyUI server (its address and port, e.g. http://desktop:8188)"


class ComfyRenderer:
    """Renders jobs on the ComfyUI server ``settings`` (``render.remote``) describe."""

    def __init__(self, settings: RemoteRenderConfig, client: A1111Client | None = None) -> None:
        if not getattr(settings, "url", ""):
            raise RemoteUnavailable(NOT_CONFIGURED, "render.remote.url is empty")
        self.settings = settings
        self.client = client or A1111Client(settings.url, settings.user, settings.password, settings.token,
                                            settings.connect_timeout_seconds, api_hint=API_HINT)
        self.client_id = uuid.uuid4().hex
        self._template: dict[str, Any] = {}  # the workflow before its placeholders were filled

    def checkpoints(self, seconds: float) -> list[str]:
        """The server's checkpoint files (``GET /object_info/CheckpointLoaderSimple``)."""
        answer = self.client.call("GET", comfyui.CHECKPOINTS, seconds=seconds)
        try:
            return comfyui.checkpoint_names(answer)
        except RemoteUnavailable as exc:
            raise exc.at(self.client.server) from None

    def render(self, job: RemoteJob, progress: ProgressCallback | None = None,
               deadline_seconds: float | None = None) -> RemoteResult:
        started = time.monotonic()
        budget = job_budget(self.settings, deadline_seconds)
        end = started + budget
        workflow = self._template = self._workflow(job)  # the owner's file first: a broken one never reaches the server
        names = self.checkpoints(min(CHECK_SECONDS, budget))
        checkpoint = self.settings.checkpoint or (names[0] if names else "")
        if comfyui.uses(workflow, "checkpoint") and not checkpoint:
            raise RemoteUnavailable(REJECTED, "the server lists no checkpoint (put one in ComfyUI's models/"
                                              "checkpoints or set render.remote.checkpoint)", self.client.server)
        image_name = self._upload(job, end) if job.init_image is not None else ""
        sent = comfyui.fill(workflow, comfyui.job_values(job, checkpoint, image_name))
        log.info("rendering on ComfyUI %s (checkpoint %s)", self.client.server, checkpoint or "of the workflow")
        listener = self._listen() if progress is not None else None
        try:
            return self._run(job, sent, checkpoint, started, end, budget, progress, listener)
        finally:
            if listener is not None:
                listener.close()

    def _run(self, job: RemoteJob, sent: dict[str, Any], checkpoint: str, started: float, end: float,
             budget: float, progress: ProgressCallback | None, listener: ProgressListener | None) -> RemoteResult:
        answer = self.client.call("POST", comfyui.PROMPT, seconds=self._left(end, POLL_CALL_SECONDS),
                                  body={"prompt": sent, "client_id": self.client_id})
        try:
            prompt_id = comfyui.prompt_id_of(answer)
        except RemoteUnavailable as exc:
            raise exc.at(self.client.server) from None
        if listener is not None:
            listener.prompt_id = prompt_id
        try:
            ref = self._wait(prompt_id, job, end, progress, listener)
            data = self.client.call("GET", comfyui.VIEW, seconds=self._left(end), params=ref, raw=True,
                                    started=True)
        except RemoteUnavailable as exc:
            if exc.reason == TIMEOUT:
                self.cancel(prompt_id)
                raise not_done_in_time(self.settings, budget, self.client.server) from None
            raise exc.at(self.client.server) from None  # name the server
        except BaseException:  # the worker was stopped (SIGTERM): free the server
            self.cancel(prompt_id)
            raise
        try:
            image = check_picture(data, job.width, job.height)
        except RemoteUnavailable as exc:  # raised without knowing the server: name it
            raise exc.at(self.client.server) from None
        parameters = comfyui.parameters_of(sent, job, checkpoint if comfyui.uses(self._template, "checkpoint") else "")
        image.info["parameters"] = parameters.to_text()
        seconds = time.monotonic() - started
        log.info("ComfyUI picture %dx%d in %.1f s from %s", image.width, image.height, seconds, self.client.server)
        return RemoteResult(image, parameters, self.client.server, seconds)

    def _workflow(self, job: RemoteJob) -> dict[str, Any]:
        if not self.settings.workflow:
            return comfyui.default_workflow(img2img=job.init_image is not None)
        try:
            workflow = comfyui.load_workflow(self.settings.workflow)
        except ValueError as exc:
            raise RemoteUnavailable(REJECTED, f"render.remote.workflow: {exc}", self.client.server) from None
        if job.init_image is not None and not comfyui.uses(workflow, "image"):
            raise RemoteUnavailable(REJECTED, "render.remote.workflow has no {{image}} placeholder for the "
                                              "picture to paint over", self.client.server)
        return workflow

    def _upload(self, job: RemoteJob, end: float) -> str:
        """The init picture on the server (``POST /upload/image``) at the job's size; the name its
        LoadImage reads."""
        picture = init_picture_png(job.init_image or b"", job.width, job.height)
        name = f"frame-{hashlib.sha256(picture).hexdigest()[:16]}.png"
        answer = self.client.call("POST", comfyui.UPLOAD, seconds=self._left(end, POLL_CALL_SECONDS),
                                  files={"image": (name, picture, "image/png"),
                                         "type": (None, "input"), "overwrite": (None, "true")})
        if not isinstance(answer, dict) or not isinstance(answer.get("name"), str):
            raise RemoteUnavailable(comfyui.BAD_RESPONSE, "the answer to POST /upload/image has no name",
                                    self.client.server)
        subfolder = answer.get("subfolder") or ""
        return f"{subfolder}/{answer['name']}" if subfolder else answer["name"]

    def _listen(self) -> ProgressListener:
        """ComfyUI's websocket for step progress and previews (the same credentials as the HTTP calls)."""
        headers = {}
        settings = self.settings
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        elif settings.user or settings.password:
            pair = base64.b64encode(f"{settings.user}:{settings.password}".encode()).decode()
            headers["Authorization"] = f"Basic {pair}"
        return ProgressListener(self.client.base, self.client_id, headers, settings.connect_timeout_seconds).start()

    def _wait(self, prompt_id: str, job: RemoteJob, end: float, progress: ProgressCallback | None,
              listener: ProgressListener | None) -> dict[str, str]:
        """Poll until the job is in the history; its picture's reference."""
        last_answer = time.monotonic()
        while True:
            if self._left(end) <= 0:
                raise RemoteUnavailable(TIMEOUT, "the deadline passed", self.client.server)
            try:
                entry = self._history(prompt_id, end)
                if entry is not None:
                    return comfyui.picture_ref(entry)
                place = comfyui.queue_place(self.client.call("GET", comfyui.QUEUE, seconds=self._poll_seconds(end)),
                                            prompt_id)
                if place is None:  # finished between the two calls, or forgotten by a restarted server
                    entry = self._history(prompt_id, end)
                    if entry is None:
                        raise RemoteUnavailable(DIED, "the server no longer knows the job (was ComfyUI restarted?)",
                                                self.client.server)
                    return comfyui.picture_ref(entry)
            except RemoteUnavailable as exc:
                if exc.reason == REFUSED:
                    raise RemoteUnavailable(DIED, "the server stopped mid-job (connection refused)",
                                            self.client.server) from None
                if exc.reason not in (TIMEOUT, DIED) or self._left(end) <= 0:
                    raise
                if time.monotonic() - last_answer >= self.settings.lost_after_seconds:
                    raise server_gone(self.settings, exc, self.client.server) from None
            else:
                last_answer = time.monotonic()
                if progress is not None:
                    self._relay(job, progress, listener)
            time.sleep(max(0.0, min(self.settings.poll_seconds, self._left(end))))

    @staticmethod
    def _relay(job: RemoteJob, progress: ProgressCallback, listener: ProgressListener | None) -> None:
        """The websocket's latest step and preview (step 0 of the job's steps without one)."""
        step, steps, done, preview = 0, job.steps, False, None
        if listener is not None and listener.steps:
            step, steps, done, preview = listener.step, listener.steps, listener.changed, listener.preview
            listener.changed = False
        progress(RemoteProgress("remote", step, steps, 0.0, step / steps if steps else 0.0, None, step_done=done,
                                preview_png=preview))

    def _history(self, prompt_id: str, end: float) -> dict[str, Any] | None:
        return comfyui.history_entry(self.client.call("GET", f"/history/{prompt_id}", seconds=self._poll_seconds(end)),
                                     prompt_id)

    def _poll_seconds(self, end: float) -> float:
        return max(0.5, min(POLL_CALL_SECONDS, self.settings.lost_after_seconds, self._left(end)))

    @staticmethod
    def _left(end: float, cap: float = math.inf) -> float:
        return min(cap, end - time.monotonic())

    def cancel(self, prompt_id: str) -> None:
        """Best effort: drop the job from ComfyUI's queue, or interrupt it when it is the one running
        (``/interrupt`` with its ``prompt_id``, so nobody else's job is stopped)."""
        try:
            place = comfyui.queue_place(self.client.call("GET", comfyui.QUEUE, seconds=INTERRUPT_SECONDS), prompt_id)
            # both answer HTTP 200 with an empty body (server.py's ``web.Response(status=200)``): raw, not JSON
            if place == 0:
                self.client.call("POST", comfyui.INTERRUPT, seconds=INTERRUPT_SECONDS, body={"prompt_id": prompt_id},
                                 raw=True)
            elif place is not None:
                self.client.call("POST", comfyui.QUEUE, seconds=INTERRUPT_SECONDS, body={"delete": [prompt_id]},
                                 raw=True)
            log.info("cancelled the job on %s", self.client.server)
        except RemoteUnavailable as exc:
            log.info("could not cancel the job on %s (%s)", self.client.server, exc.reason)


def render_comfyui(settings: RemoteRenderConfig, job: RemoteJob, progress: ProgressCallback | None = None,
                   deadline_seconds: float | None = None) -> RemoteResult:
    """Paint ``job`` on the ComfyUI server of ``settings`` (``config.render.remote``), or raise RemoteUnavailable."""
    renderer = ComfyRenderer(settings)
    with renderer.client:
        return renderer.render(job, progress, deadline_seconds)


def check_comfyui(settings: RemoteRenderConfig, seconds: float = 5.0) -> list[str]:
    """The server's checkpoints within ``seconds`` (``frame config check``), or RemoteUnavailable."""
    renderer = ComfyRenderer(settings)
    with renderer.client:
        return renderer.checkpoints(seconds)

