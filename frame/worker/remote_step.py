"""The render worker's remote step: tonight's picture from the LAN render server, or the reason to
paint it on the frame instead (``render.backend: remote`` for an AUTOMATIC1111-compatible server,
``comfyui`` for ComfyUI: the same steps, state file and fallback for both).

The worker's generate step calls ``paint_remotely`` before it loads the local pipeline. On success
the server's picture is ``JOB_DIR/image.png`` (with its A1111 ``parameters`` text) and
``generation.json`` holds the settings the server reports, exactly where a local render puts them, so
the rest of the night (panel, gallery, store) does not know the difference. On any
``RemoteUnavailable`` the reason is recorded and ``False`` tells the step to paint locally, in the
same render window: the remote job gets at most ``WINDOW_SHARE`` of the time left before the
night's deadline, so the fallback always has the rest.

``JOB_DIR/remote.json`` makes this resumable after a crash or power cut:

* ``{"state": "asking", "attempts": n}`` is written before each request: a worker restarted while a
  remote job ran asks the server again (same prompt and seed: the same picture), at most
  ``MAX_ATTEMPTS`` times in all, then paints locally;
* ``{"state": "failed", ...}`` is final: a restarted worker goes straight to the local pipeline
  (which resumes from its own per-step checkpoint) and never asks the server again for this render;
* ``{"state": "done", ...}`` describes the server's picture; ``image.png`` (written after it) is
  what marks the step finished, so a cut between the two only means asking again.

Either way exactly one ``image.png`` is written per render, and the daemon publishes one picture.
What happened is said three times: a log line, the live status's ``backend_note`` (the phone page's
progress box) and ``painted``/``remote_fallback`` in the stored picture's "why" (its details).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frame.atomicfile import write_bytes_atomic
from frame.config.schema import Config
from frame.diffusion.pngmeta import png_bytes
from frame.redact import redact_url
from frame.remote.errors import DIED, TIMEOUT, RemoteUnavailable
from frame.remote.night import night_job
from frame.statefile import read_json, write_json
from frame.worker import prompt_settings
from frame.worker.events import Generation, StageEvent
from frame.worker.records import RenderJob, ThemeChoice, Why

log = logging.getLogger(__name__)

STATE_FILE = "remote.json"
MAX_ATTEMPTS = 2        # requests per render: one, and one more after an interrupted worker
WINDOW_SHARE = 0.5      # of the time left before the deadline; the fallback keeps the rest
MIN_REMOTE_SECONDS = 5.0
SERVER_BACKENDS = ("remote", "comfyui")
UNEXPECTED = "unexpected"  # a bug or an I/O error in the remote path (logged with its traceback)

Emit = Callable[[StageEvent], None]


def paint_remotely(job: RenderJob, config: Config, choice: ThemeChoice, job_dir: Path, emit: Emit,
                   progress: Callable[[Any], None]) -> bool:
    """True when ``JOB_DIR/image.png`` now holds the server's picture; False: paint it on the frame
    (the reason is already logged, emitted and recorded). ``progress`` is the worker's ProgressRelay."""
    if config.render.backend not in SERVER_BACKENDS:
        return False
    state = read_json(job_dir / STATE_FILE, default={}) or {}
    if state.get("state") == "failed":
        _announce_fallback(state, emit, resumed=True)
        return False
    attempts = int(state.get("attempts") or 0)
    try:
        if attempts >= MAX_ATTEMPTS:
            raise RemoteUnavailable(DIED, f"the render worker was interrupted {attempts} times while the "
                                          "server painted this picture")
        budget = remote_budget(job, config)
        if budget is not None and budget < MIN_REMOTE_SECONDS:
            raise RemoteUnavailable(TIMEOUT, "too little of the render window is left to ask the server")
        write_json(job_dir / STATE_FILE, {"state": "asking", "attempts": attempts + 1})
        result = _ask(job, config, choice, emit, progress, budget, resumed=attempts > 0)
    except Exception as exc:  # noqa: BLE001 - whatever goes wrong remotely must not cost the night
        if not isinstance(exc, RemoteUnavailable):
            log.exception("the remote render failed unexpectedly")
            exc = RemoteUnavailable(UNEXPECTED, f"the remote render failed unexpectedly ({type(exc).__name__}: "
                                                f"{exc})")
        failed = {"state": "failed", "attempts": attempts, "reason": exc.reason, "message": str(exc),
                  "server": exc.server}
        write_json(job_dir / STATE_FILE, failed)
        _announce_fallback(failed, emit, resumed=False)
        return False
    _store(result, job_dir, attempts + 1, config.render.backend)
    return True


def remote_budget(job: RenderJob, config: Config, now: float | None = None) -> float | None:
    """Seconds the server may take: ``WINDOW_SHARE`` of what is left before the job's deadline (epoch
    seconds; None = no deadline, only ``render.remote.job_timeout_minutes`` applies)."""
    deadline = job.deadline
    if deadline is None:
        return None
    left = float(deadline) - (time.time() if now is None else now)
    return min(config.render.remote.job_timeout_minutes * 60.0, max(0.0, left * WINDOW_SHARE))


def _ask(job: RenderJob, config: Config, choice: ThemeChoice, emit: Emit, progress: Callable[[Any], None],
         budget: float | None, resumed: bool) -> Any:
    from frame.remote.comfy_render import render_comfyui
    from frame.remote.render import render_remote

    server = redact_url(config.render.remote.url or "")
    note = f"Painting on the render server {server}" + (" (asking again after a restart)" if resumed else "")
    config = prompt_settings.with_remote_prompt_settings(config, job.settings)  # a queued prompt's own
    remote_job = night_job(config, choice.prompt, choice.negative_prompt, job.seed)
    log.info("%s: %r, seed %d, %d steps %s, guidance %g, %dx%d", note, choice.prompt, job.seed, remote_job.steps,
             remote_job.sampler, remote_job.guidance, remote_job.width, remote_job.height)
    emit(StageEvent("asking the render server", backend_note=note + "."))
    paint = render_comfyui if config.render.backend == "comfyui" else render_remote
    result = paint(config.render.remote, remote_job, progress=progress, deadline_seconds=budget)
    emit(StageEvent("picture received from the render server",
                    backend_note=f"Painted on the render server {result.server} in {result.seconds:.0f} s."))
    return result


def _store(result: Any, job_dir: Path, attempts: int, backend: str) -> None:
    """The server's picture where a local render puts its own (generation.json, then image.png)."""

    params = result.parameters
    write_json(job_dir / "generation.json", Generation(
        steps=params.steps, guidance=params.guidance, sampler=params.sampler, width=params.width,
        height=params.height, model=params.model, backend=backend, server=result.server).to_json())
    write_json(job_dir / STATE_FILE, {"state": "done", "attempts": attempts, "server": result.server,
                                      "model": params.model, "seconds": round(result.seconds, 1)})
    write_bytes_atomic(job_dir / "image.png", png_bytes(result.image))


def _announce_fallback(state: dict[str, Any], emit: Emit, resumed: bool) -> None:
    sentence = fallback_sentence(state)
    if not resumed:
        log.warning("remote render failed (reason: %s): %s", state.get("reason"), sentence)
    emit(StageEvent("painting on the frame instead", backend_note=sentence))


def fallback_sentence(state: dict[str, Any]) -> str:
    message = str(state.get("message") or "the render server failed").rstrip(".")
    return f"{message[:1].upper()}{message[1:]} — painting tonight's picture on the frame instead."


def why_with_backend(why: Why, job_dir: Path) -> Why:
    """The choice's "why" plus where the picture was painted, when a render server was involved:
    ``painted`` (a sentence, listed in the picture's details) and ``remote_fallback`` (the reason code)."""
    state = read_json(job_dir / STATE_FILE, default=None)
    if not isinstance(state, dict):
        return why
    extra: dict[str, Any] = {}
    if state.get("state") == "done":
        extra["painted"] = f"on the render server {state.get('server')} ({state.get('model')})"
    elif state.get("state") == "failed":
        extra["painted"] = f"on this frame, because {str(state.get('message') or 'the render server failed')}"
        extra["remote_fallback"] = state.get("reason")
    return why.with_details(**extra) if extra else why
