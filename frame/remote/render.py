"""One night's picture from a LAN render server: ``render_remote(settings, job, progress)``.

The job's POST runs in a helper thread under the job's deadline while this thread polls
``/sdapi/v1/progress`` every ``poll_seconds`` and hands each answer to ``progress`` as a frame
``Progress`` (phase "remote"; ``preview()`` is the server's live preview), so the render worker's
``ProgressRelay`` shows it on the phone page unchanged. The job is given up — with
``RemoteUnavailable``, meaning "paint on the frame" — when

* the server is not reachable, refuses the credentials or answers an error before the job starts
  (the ``GET /sdapi/v1/sd-models`` check, a few seconds);
* the job's wall-clock deadline passes (``job_timeout_minutes``, or less when the caller's render
  window ends sooner: ``deadline_seconds``);
* the POST's connection breaks, or the server answers nothing at all, progress polls included, for
  ``lost_after_seconds`` (a desktop switched off mid-job sends no reset);
* the picture does not decode, is truncated or has the wrong size.
"""

from __future__ import annotations

import io
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image

from frame.diffusion.pngmeta import GenerationParameters
from frame.diffusion.progress import Progress
from frame.remote import a1111
from frame.remote.a1111 import RemoteJob
from frame.remote.client import A1111Client, CancellableDeadline
from frame.remote.errors import DIED, NOT_CONFIGURED, TIMEOUT, RemoteUnavailable
from frame.remote.picture import check_picture, decode_base64_image

if TYPE_CHECKING:
    from frame.config.schema import RemoteRenderConfig

log = logging.getLogger(__name__)

ProgressCallback = Callable[[Progress], None]
CHECK_SECONDS = 10.0  # the reachability check before the job (A1111 lists models in well under a second)
POLL_CALL_SECONDS = 10.0
INTERRUPT_SECONDS = 2.0  # the supervisor SIGKILLs a worker 6 s after SIGTERM


def job_budget(settings: RemoteRenderConfig, deadline_seconds: float | None) -> float:
    """Seconds the job may take: ``job_timeout_minutes``, or less when the caller's render window ends sooner."""
    return min(settings.job_timeout_minutes * 60.0, math.inf if deadline_seconds is None else deadline_seconds)


def not_done_in_time(settings: RemoteRenderConfig, budget: float, server: str) -> RemoteUnavailable:
    """The timeout both clients raise, naming which limit ``budget`` came from (the owner's setting or
    the render window), so the owner knows what to lengthen."""
    limit = ("render.remote.job_timeout_minutes" if budget == settings.job_timeout_minutes * 60.0
             else "the render window")
    return RemoteUnavailable(TIMEOUT, f"the picture was not done within {budget:g} s ({limit})", server)


def server_gone(settings: RemoteRenderConfig, exc: RemoteUnavailable, server: str) -> RemoteUnavailable:
    """``lost_after_seconds`` without any answer: a desktop switched off mid-job sends no reset."""
    return RemoteUnavailable(DIED, f"no answer for {settings.lost_after_seconds:g} s ({exc.detail}): the server "
                                   "is gone", server)


@dataclass(frozen=True)
class RemoteProgress(Progress):
    """A progress report from the render server; ``preview`` shows its live preview image, if any."""

    preview_png: bytes | None = None

    def preview(self, scale: int = 1) -> Image.Image | None:
        """The server's live preview, shrunk to the size of a local latent preview (1/8 × ``scale``)."""
        if self.preview_png is None:
            return None
        try:
            image = Image.open(io.BytesIO(self.preview_png)).convert("RGB")
        except (OSError, ValueError):
            return None
        size = (max(1, image.width * scale // 8), max(1, image.height * scale // 8))
        return image.resize(size, Image.BILINEAR)


@dataclass(frozen=True)
class RemoteResult:
    """What a remote render gives back, as the local pipeline does: the picture (``image.info
    ["parameters"]`` holds the A1111 parameters text), its ``parameters``, and where it came from."""

    image: Image.Image
    parameters: GenerationParameters
    server: str          # redacted URL
    seconds: float


class _Post:
    """The job's POST in a helper thread; ``deadline`` lets the watcher cut it short."""

    def __init__(self, client: A1111Client, job: RemoteJob, seconds: float) -> None:
        self.client, self.job = client, job
        self.deadline = CancellableDeadline(seconds)
        self.answer: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="remote-render", daemon=True)

    def _run(self) -> None:
        try:
            with self.deadline:
                self.answer = self.client.call("POST", self.job.endpoint, self.deadline.seconds,
                                               body=a1111.request_payload(self.job), deadline=self.deadline,
                                               started=True)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self.error = exc


class RemoteRenderer:
    """Renders jobs on the server ``settings`` describe (``render.remote``: url, user, password, token,
    connect_timeout_seconds, job_timeout_minutes, poll_seconds, lost_after_seconds)."""

    def __init__(self, settings: RemoteRenderConfig, client: A1111Client | None = None) -> None:
        if not getattr(settings, "url", ""):
            raise RemoteUnavailable(NOT_CONFIGURED, "render.remote.url is empty")
        self.settings = settings
        self.client = client or A1111Client(settings.url, settings.user, settings.password, settings.token,
                                            settings.connect_timeout_seconds)

    def render(self, job: RemoteJob, progress: ProgressCallback | None = None,
               deadline_seconds: float | None = None) -> RemoteResult:
        started = time.monotonic()
        budget = job_budget(self.settings, deadline_seconds)
        titles = self.client.models(min(CHECK_SECONDS, budget))
        log.info("rendering on %s (models: %s)", self.client.server, ", ".join(titles[:3]) or "none listed")
        post = _Post(self.client, job, max(0.1, budget - (time.monotonic() - started)))
        post.thread.start()
        try:
            self._watch(post, job, progress)
        except BaseException as exc:  # the worker was stopped (SIGTERM) or the watcher gave up
            if not isinstance(exc, RemoteUnavailable):
                self.interrupt()
            raise
        if isinstance(post.error, RemoteUnavailable) and post.error.reason == TIMEOUT:
            self.interrupt()  # the server may still be painting a picture nobody will collect
            raise not_done_in_time(self.settings, budget, self.client.server) from None
        if post.error is not None:
            raise post.error
        try:
            encoded, info = a1111.answer_image_and_info(post.answer)
            image = check_picture(decode_base64_image(encoded), job.width, job.height)
        except RemoteUnavailable as exc:  # raised without knowing the server: name it
            raise exc.at(self.client.server) from None
        fallback_model = titles[0] if len(titles) == 1 else "remote"
        parameters = a1111.parameters_from_info(info, job, fallback_model)
        infotexts = info.get("infotexts")
        image.info["parameters"] = (infotexts[0] if isinstance(infotexts, list) and infotexts
                                    and isinstance(infotexts[0], str) else parameters.to_text())
        seconds = time.monotonic() - started
        log.info("remote picture %dx%d in %.1f s from %s", image.width, image.height, seconds, self.client.server)
        return RemoteResult(image, parameters, self.client.server, seconds)

    def interrupt(self) -> None:
        """Best effort ``POST /sdapi/v1/interrupt``: free the server from a job frame gave up on.

        A1111 interrupts whatever it is painting, so this is only sent while frame's own job runs
        (stopped worker, frame's deadline passed), never when the server was lost."""
        try:
            self.client.call("POST", a1111.INTERRUPT, seconds=INTERRUPT_SECONDS)
            log.info("asked %s to interrupt the job", self.client.server)
        except RemoteUnavailable as exc:
            log.info("could not interrupt the job on %s (%s)", self.client.server, exc.reason)

    def _watch(self, post: _Post, job: RemoteJob, progress: ProgressCallback | None) -> None:
        """Poll progress until the POST ends; cut it when the server is lost."""
        last_answer = time.monotonic()
        last_step = -1
        while True:
            post.thread.join(self.settings.poll_seconds)
            if not post.thread.is_alive():
                return
            if post.deadline.remaining() <= 0:
                post.deadline.cancel()
                post.thread.join()
                return
            try:
                seconds = min(POLL_CALL_SECONDS, self.settings.lost_after_seconds, post.deadline.remaining())
                snapshot = self.client.progress(max(0.5, seconds))
            except RemoteUnavailable as exc:
                if time.monotonic() - last_answer >= self.settings.lost_after_seconds:
                    post.deadline.cancel()
                    post.thread.join()
                    raise server_gone(self.settings, exc, self.client.server) from None
                continue
            last_answer = time.monotonic()
            if progress is not None and snapshot.active:
                last_step = self._relay(snapshot, job, progress, last_step)

    @staticmethod
    def _relay(snapshot: a1111.ProgressSnapshot, job: RemoteJob, progress: ProgressCallback, last_step: int) -> int:
        steps = snapshot.steps or job.steps
        preview = None
        if snapshot.preview_b64:
            try:
                preview = decode_base64_image(snapshot.preview_b64)
            except RemoteUnavailable:
                preview = None
        progress(RemoteProgress("remote", snapshot.step, steps, 0.0, snapshot.fraction, snapshot.eta_seconds,
                                step_done=snapshot.step != last_step, preview_png=preview))
        return snapshot.step


def render_remote(settings: RemoteRenderConfig, job: RemoteJob, progress: ProgressCallback | None = None,
                  deadline_seconds: float | None = None) -> RemoteResult:
    """Paint ``job`` on the server of ``settings`` (``config.render.remote``), or raise RemoteUnavailable."""
    renderer = RemoteRenderer(settings)
    with renderer.client:
        return renderer.render(job, progress, deadline_seconds)


def check_reachable(settings: RemoteRenderConfig, seconds: float = 5.0) -> list[str]:
    """The server's model titles within ``seconds`` (``frame config check``), or RemoteUnavailable."""
    with RemoteRenderer(settings).client as client:
        return client.models(seconds)

