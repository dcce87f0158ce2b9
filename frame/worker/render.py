"""The render worker, ``python -m frame.worker.render JOB_DIR``: choose → generate → prepare.

Each step writes its output into the job folder atomically and is skipped when that output exists,
so a worker restarted after a crash or SIGKILL continues where the last one stopped; generation itself
resumes from the diffusion pipeline's per-step state in ``JOB_DIR/diffusion``. A part of frame that is
not available raises ``StepUnavailable`` naming the step — never a placeholder result. The process
around the steps (locks, signals, events, exit codes) is ``frame.worker.process``.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frame.atomicfile import write_bytes_atomic
from frame.config.redact import redact_url
from frame.statefile import read_json, write_json
from frame.worker import process
from frame.worker.errors import StepUnavailable
from frame.worker.pipeline import PipelineHolder
from frame.worker.process import Emit
from frame.worker.remote_step import why_with_backend

log = logging.getLogger(__name__)


# choose ---------------------------------------------------------------------------------------------

def choose(job: dict[str, Any], config: Any, job_dir: Path, emit: Emit, pipeline: PipelineHolder) -> dict[str, Any]:
    """The queued prompt, or the taste picker's choice among the job's candidates (``choice.json``)."""
    path = job_dir / "choice.json"
    existing = read_json(path)
    if existing:
        return existing
    emit("stage", stage="choosing")
    if job.get("choice"):
        choice = dict(job["choice"])
    elif not job.get("candidates"):
        raise StepUnavailable("choose", "no candidate themes or prompts (taste.themes is empty?)")
    else:
        from frame.worker import tastechild  # the trained model runs in a child: no scikit-learn here

        choice = tastechild.choose(job, config, lambda texts: pipeline.get(emit).embed_text(texts), job_dir)
    choice.setdefault("negative_prompt", "")
    choice["negative_prompt"] = choice["negative_prompt"] or config.model.negative_prompt
    write_json(path, choice)
    log.info("chose %r (%s)", choice["prompt"], choice.get("why", {}).get("sentence", ""))
    return choice


# generate -------------------------------------------------------------------------------------------

def _png_bytes(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


class ProgressRelay:
    """Turns the pipeline's progress reports into protocol lines: every finished step (with a small
    latent preview written to ``JOB_DIR/preview.png`` for the phone page) and at most one in-between
    update per second (the pipeline reports after every op)."""

    def __init__(self, job_dir: Path, emit: Emit, interval: float = 1.0) -> None:
        self.job_dir, self.emit, self.interval = job_dir, emit, interval
        self._last = 0.0

    def __call__(self, report: Any) -> None:
        now = time.monotonic()
        if not report.step_done and now - self._last < self.interval:
            return
        self._last = now
        fields = {"stage": f"generating ({report.phase})", "step": int(report.step), "steps": int(report.steps),
                  "fraction": round(float(report.fraction), 4)}
        if report.eta_seconds is not None:
            fields["eta_seconds"] = round(float(report.eta_seconds), 1)
        for name in ("bytes_per_step", "link_rate"):  # weight bytes per step, HTTP bytes per second
            if getattr(report, name, None) is not None:
                fields[name] = round(float(getattr(report, name)))
        if report.step_done:
            preview = report.preview(scale=2)
            if preview is not None:
                write_bytes_atomic(self.job_dir / "preview.png", _png_bytes(preview))
                fields["preview"] = True
        self.emit("progress", **fields)


def _png_with_parameters(image: Any) -> bytes:
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    if image.info.get("parameters"):
        info.add_text("parameters", image.info["parameters"])  # A1111-style, readable by other tools
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def _steps_for_tonight(job: dict[str, Any], config: Any, pipe: Any, size: tuple[int, int], job_dir: Path,
                       emit: Emit) -> int | None:
    """The largest step count whose estimated night fits before the job's deadline (never above the
    configured steps, never below the model's minimum; ``frame.worker.step_choice``). Without a
    deadline, or if the estimate fails, the configured steps: the estimate must never cost a night."""
    if job.get("deadline") is None and not (job_dir / "step_choice.json").exists():
        return config.model.steps
    emit("stage", stage="estimating tonight's steps")
    try:
        from frame.worker import step_choice as nightly

        choice = nightly.night_steps_in_child(job_dir, size)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("no step estimate (%s): rendering the configured steps", exc)
        return config.model.steps
    log.info("steps: %s", choice.sentence())
    emit("stage", stage="generating", step_choice=choice.sentence())
    return choice.steps


def generate(job: dict[str, Any], config: Any, choice: dict[str, Any], job_dir: Path, emit: Emit,
             pipeline: PipelineHolder) -> Path:
    """Generate ``image.png`` (resuming from ``JOB_DIR/diffusion``) and record the resolved settings."""
    out = job_dir / "image.png"
    if out.exists():
        return out
    if config.render.backend == "remote":  # the LAN render server first; False: paint here (issue 17)
        from frame.worker.remote_step import paint_remotely

        if paint_remotely(job, config, choice, job_dir, emit, ProgressRelay(job_dir, emit)):
            return out
    pipe = pipeline.get(emit)
    model = config.model
    from frame.diffusion.sizes import night_size  # the pipeline is loaded by now

    width, height = night_size(config, pipe)
    steps = _steps_for_tonight(job, config, pipe, (width, height), job_dir, emit)
    settings = pipe.settings(choice["prompt"], choice["negative_prompt"], steps, model.guidance,
                             model.sampler, job["seed"], width, height)
    write_json(job_dir / "generation.json", {
        "steps": settings.steps, "guidance": settings.guidance, "sampler": settings.sampler,
        "width": settings.width, "height": settings.height, "model": pipe.info.name})
    emit("stage", stage="generating", steps=settings.steps)
    image = pipe.generate(settings.prompt, negative_prompt=settings.negative_prompt, steps=settings.steps,
                          guidance=settings.guidance, sampler=settings.sampler, seed=settings.seed,
                          width=settings.width, height=settings.height, callback=ProgressRelay(job_dir, emit),
                          resume_dir=job_dir / "diffusion")
    write_bytes_atomic(out, _png_with_parameters(image))
    return out


# prepare --------------------------------------------------------------------------------------------

def prepare_for_panel(config: Any, image_path: Path, job_dir: Path, emit: Emit) -> Path:
    out = job_dir / "panel.png"
    if out.exists():
        return out
    try:
        import frame.display as display
        from frame.display.device import DisplaySettings
    except ImportError as exc:
        raise StepUnavailable("prepare", f"panel preparation is not available: {exc}") from exc
    emit("stage", stage="preparing for the panel")
    if config.display.panel == "inky":  # size and inks are known only from the board's EEPROM
        with display.open_display(DisplaySettings.from_section(config.display)) as device:
            _, prepared = device.prepare(image_path)
    else:
        panel = display.get_panel(config.display.panel, config.display.size, config.display.palette)
        prepared = display.prepare(image_path, panel, fit=config.display.fit, rotate=config.display.rotate,
                                   saturation=config.display.saturation, dither=config.display.dither)
    write_bytes_atomic(out, _png_bytes(prepared))
    return out


# the job --------------------------------------------------------------------------------------------

def _timed(timings: dict[str, float], name: str, func: Callable[[], Any]) -> Any:
    """Run one step, adding its duration to ``timings``; errors are tagged with the step's name."""
    started = time.monotonic()
    try:
        value = func()
    except Exception as exc:
        if not hasattr(exc, "step"):
            exc.step = name  # type: ignore[attr-defined]
        raise
    timings[name] = round(timings.get(name, 0.0) + time.monotonic() - started, 3)  # summed over restarts
    return value


def run_render(job: dict[str, Any], config: Any, job_dir: Path, emit: Emit) -> dict[str, Any]:
    """Run a ``render`` job; return what the daemon needs to publish it."""
    timings = read_json(job_dir / "timings.json", default={})
    pipeline = PipelineHolder(config)
    choice = _timed(timings, "choose", lambda: choose(job, config, job_dir, emit, pipeline))
    image = _timed(timings, "generate", lambda: generate(job, config, choice, job_dir, emit, pipeline))
    write_json(job_dir / "timings.json", timings)
    panel = _timed(timings, "prepare", lambda: prepare_for_panel(config, image, job_dir, emit))
    write_json(job_dir / "timings.json", timings)
    generation = read_json(job_dir / "generation.json", default={})
    meta = {
        "prompt": choice["prompt"], "negative_prompt": choice["negative_prompt"],
        "theme": choice.get("theme", ""), "style": choice.get("style", ""), "origin": choice.get("origin", ""),
        "seed": job["seed"], "sampler": generation.get("sampler"), "steps": generation.get("steps"),
        "guidance": generation.get("guidance"), "width": generation.get("width"),
        "height": generation.get("height"),
        "model": redact_url(generation.get("model") or config.model.source),  # stored and shown: no credentials
        "why": why_with_backend(choice.get("why"), job_dir), "features": choice.get("features"), "timings": timings,
    }
    plot = (choice.get("why") or {}).get("plot")
    return {"image": str(image), "panel": str(panel), "meta": meta,
            "why_plot": str(job_dir / plot) if plot else None,
            "prompt_id": choice.get("prompt_id"), "feed_item_id": choice.get("feed_item_id")}


def main(argv: list[str] | None = None) -> int:
    return process.main(argv, "render", run_render)


if __name__ == "__main__":  # run the importable module, so its logger is frame.worker.render
    from frame.worker import render

    sys.exit(render.main())
