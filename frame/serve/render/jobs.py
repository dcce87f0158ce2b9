"""One render at a time: requests wait in a queue; the progress endpoint describes the running job.

Each HTTP request thread hands its job to ``RenderQueue.submit`` and waits for the result; one thread
runs the jobs in arrival order (``serve_forever``), so the pipeline (one model in memory, one ``run``
at a time) is never shared. That thread is the process's main thread: frame's engine sets OpenBLAS's
thread count per GEMM (``frame.engine.blas_threads``), and a count set from a helper thread did not
take effect there (OpenBLAS 0.3.31 from numpy's wheel), so a picture painted from a helper thread
summed some products in another order and differed from the frame's own (1 of 24576 values by 1 on
the demo model) and spent CPU on spinning BLAS workers. When ``max_waiting`` jobs already wait,
``submit`` refuses at once (the client falls back to painting on its own device rather than waiting
behind a long queue).
"""

from __future__ import annotations

import base64
import io
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image

from frame.diffusion import strength
from frame.diffusion.progress import Progress

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline
    from frame.diffusion.render_settings import RenderSettings

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """Too many jobs are already waiting."""


@dataclass(frozen=True)
class RenderRequest:
    """A validated request in frame's units (``settings`` from ``Pipeline.settings``); ``init_image``
    (decoded, not yet fitted) makes it img2img at ``settings.strength``."""

    settings: RenderSettings
    init_image: Image.Image | None = None

    @property
    def job(self) -> str:
        return "txt2img" if self.init_image is None else "img2img"

    @property
    def steps_run(self) -> int:
        """The denoising steps that run (img2img runs the last ``int(steps * strength)``)."""
        s = self.settings
        return s.steps if self.init_image is None else strength.steps_run(s.steps, s.strength)


@dataclass
class _Running:
    started: float
    job: str = "txt2img"
    step: int = 0
    steps: int = 0
    fraction: float = 0.0
    eta_seconds: float | None = None
    preview: Image.Image | None = None


class RenderQueue:
    """Runs ``pipe.generate`` for one request at a time, in arrival order."""

    def __init__(self, pipe: Pipeline, max_waiting: int = 8) -> None:
        self.pipe = pipe
        self.max_waiting = max_waiting
        self._jobs: queue.Queue[tuple[RenderRequest, Future] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._waiting = 0
        self._running: _Running | None = None
        self._closed = threading.Event()

    def submit(self, request: RenderRequest) -> Future:
        future: Future = Future()
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise QueueFull(f"{self._waiting} jobs are already waiting")
            self._waiting += 1
        self._jobs.put((request, future))
        return future

    def close(self) -> None:
        """Stop ``serve_forever`` after the running job; waiting jobs are answered with an error."""
        self._closed.set()
        self._jobs.put(None)

    def serve_forever(self) -> None:
        """Run jobs in the calling thread (the main thread, see the module docstring) until ``close``."""
        while self.run_next(timeout=None):
            pass

    def run_next(self, timeout: float | None = None) -> bool:
        """Run the next job (waiting up to ``timeout`` s for one); False once closed or nothing came."""
        try:
            item = self._jobs.get(timeout=timeout)
        except queue.Empty:
            return False
        if item is None or self._closed.is_set():
            if item is not None:
                item[1].set_exception(RuntimeError("frame serve-render is stopping"))
            return False
        request, future = item
        with self._lock:
            self._waiting -= 1
            self._running = _Running(time.monotonic(), request.job, steps=request.steps_run)
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(self._render(request))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
                log.exception("render failed")
                future.set_exception(exc)
        with self._lock:
            self._running = None
        return True

    def _render(self, request: RenderRequest) -> Image.Image:
        s = request.settings
        started = time.monotonic()
        image = self.pipe.generate(s, callback=self._on_progress, init_image=request.init_image)
        log.info("painted %dx%d (%s), %d steps, in %.1f s", s.width, s.height, request.job, request.steps_run,
                 time.monotonic() - started)
        return image

    def _on_progress(self, report: Progress) -> None:
        preview = report.preview(scale=2) if report.step_done else None
        with self._lock:
            running = self._running
            if running is None:
                return
            running.step, running.steps = report.step, report.steps or running.steps
            running.fraction, running.eta_seconds = report.fraction, report.eta_seconds
            if preview is not None:
                running.preview = preview

    def progress(self, with_image: bool = True) -> dict[str, Any]:
        """A1111's ``/sdapi/v1/progress`` answer for the running job (zeros when idle)."""
        with self._lock:
            running, waiting = self._running, self._waiting
            snapshot = None if running is None else (running.job, running.step, running.steps, running.fraction,
                                                     running.eta_seconds, running.preview)
        state = {"skipped": False, "interrupted": False, "job": "", "job_count": 0, "job_no": 0,
                 "job_timestamp": "0", "sampling_step": 0, "sampling_steps": 0, "queued": waiting}
        if snapshot is None:
            return {"progress": 0, "eta_relative": 0, "state": state, "current_image": None,
                    "textinfo": f"{waiting} waiting" if waiting else None}
        job, step, steps, fraction, eta, preview = snapshot
        state.update(job=job, job_count=1, sampling_step=step, sampling_steps=steps)
        image = None
        if with_image and preview is not None:
            buffer = io.BytesIO()
            preview.save(buffer, format="PNG")
            image = base64.b64encode(buffer.getvalue()).decode("ascii")
        return {"progress": round(fraction, 4), "eta_relative": round(eta, 1) if eta is not None else 0,
                "state": state, "current_image": image, "textinfo": f"{waiting} waiting" if waiting else None}
