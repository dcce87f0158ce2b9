"""The render worker, ``python -m frame.worker.render JOB_DIR``: choose → generate → prepare.

Each step writes its output into the job folder atomically and is skipped when that output exists,
so a worker restarted after a crash or SIGKILL continues where the last one stopped; generation itself
resumes from the diffusion pipeline's per-step state in ``JOB_DIR/diffusion``. A part of frame that is
not available raises ``StepUnavailable`` naming the step — never a placeholder result. The process
around the steps (locks, signals, events, exit codes) is ``frame.worker.process``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import PngImagePlugin

from frame.atomicfile import write_bytes_atomic
from frame.config import lora_tags
from frame.config.schema import Config
from frame.diffusion.previews import TinyPreviewer, previewer_for, projection_preview
from frame.diffusion.sizes import night_size
from frame.redact import redact_url
from frame.statefile import read_json, write_json
from frame.worker import (
    process,
    prompt_settings,
    tastechild,  # the trained model runs in a child: no scikit-learn here
)
from frame.worker import step_choice as nightly
from frame.worker.embeddings import NightEmbed
from frame.worker.errors import StepFailed, StepUnavailable, step_failed
from frame.worker.events import Generation, PictureMeta, ProgressEvent, RenderOutput, StageEvent, Timings
from frame.worker.pipeline import PipelineHolder
from frame.worker.process import Emit
from frame.worker.records import RenderJob, ThemeChoice, Why
from frame.worker.remote_step import SERVER_BACKENDS, paint_remotely, why_with_backend

if TYPE_CHECKING:
    from PIL import Image

    from frame.diffusion.pipeline import Pipeline
    from frame.diffusion.progress import Progress
    from frame.diffusion.render_plan import RenderPlan

log = logging.getLogger(__name__)

OWN_SETTINGS = "own_settings.json"  # written only when the model refused a queued prompt's own settings
LORAS = "loras.json"  # what became of each LoRA (name -> "matched N layers" / "not applied: why")


# choose ---------------------------------------------------------------------------------------------

def choose(job: RenderJob, config: Config, job_dir: Path, emit: Emit, pipeline: PipelineHolder) -> ThemeChoice:
    """The queued prompt, or the taste picker's choice among the job's candidates (``choice.json``)."""
    path = job_dir / "choice.json"
    existing = read_json(path)
    if existing:
        return ThemeChoice.from_json(existing)
    emit(StageEvent("choosing"))
    if job.choice is not None:
        choice = job.choice
    elif not job.candidates:
        raise StepUnavailable("choose", "no candidate themes or prompts (taste.themes is empty?)")
    else:
        embed = NightEmbed(lambda: pipeline.get(emit), job.state_dir)  # kept embeddings: only new texts run
        choice = tastechild.choose(job, config, embed, job_dir, embed_apart=tastechild.embed_in_child)
        embed.save_counts(job_dir)
    choice = dataclasses.replace(choice, negative_prompt=choice.negative_prompt or config.model.negative_prompt)
    write_json(path, choice.to_json())
    log.info("chose %r (%s)", choice.prompt, choice.why.sentence)
    return choice


# generate -------------------------------------------------------------------------------------------

def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


class ProgressRelay:
    """Turns the pipeline's progress reports into protocol lines: every finished step (with a small
    latent preview written to ``JOB_DIR/preview.png`` for the phone page) and at most one in-between
    update per second (the pipeline reports after every op). It also times each denoising step
    (``step_seconds``: from the previous finished step, the first from the UNet's first report) for the
    step times kept from night to night (``frame.estimate.step_history``)."""

    def __init__(self, job_dir: Path, emit: Emit, interval: float = 1.0,
                 preview: Callable[[Progress], Image.Image | None] | None = projection_preview) -> None:
        self.job_dir, self.emit, self.interval = job_dir, emit, interval
        self.preview = preview  # None: render.previews is off (frame.diffusion.previews)
        self._last = 0.0
        self._step_started: float | None = None
        self.step_seconds: list[float] = []

    def _time_step(self, report: Progress, now: float) -> None:
        if report.phase != "unet":
            return
        if self._step_started is None:
            self._step_started = now
        elif report.step_done:
            self.step_seconds.append(now - self._step_started)
            self._step_started = now

    def __call__(self, report: Progress) -> None:
        now = time.monotonic()
        self._time_step(report, now)
        if not report.step_done and now - self._last < self.interval:
            return
        self._last = now
        preview = self.preview(report) if report.step_done and self.preview is not None else None
        if preview is not None:
            write_bytes_atomic(self.job_dir / "preview.png", _png_bytes(preview))
        self.emit(ProgressEvent(
            stage=f"generating ({report.phase})", step=int(report.step), steps=int(report.steps),
            fraction=round(float(report.fraction), 4),
            eta_seconds=round(float(report.eta_seconds), 1) if report.eta_seconds is not None else None,
            preview=preview is not None, bytes_per_step=_rounded(report.bytes_per_step),
            link_rate=_rounded(report.link_rate), cache_bytes_per_step=_rounded(report.cache_bytes_per_step)))


def _rounded(value: float | None) -> int | None:
    """Weight bytes per step or HTTP bytes per second, when the model counted them."""
    return round(float(value)) if value is not None else None


def _png_with_parameters(image: Image.Image) -> bytes:
    info = PngImagePlugin.PngInfo()
    if image.info.get("parameters"):
        info.add_text("parameters", image.info["parameters"])  # A1111-style, readable by other tools
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def _steps_for_tonight(job: RenderJob, config: Config, pipe: Pipeline, size: tuple[int, int], job_dir: Path,
                       emit: Emit) -> int | None:
    """The largest step count whose estimated night fits before the job's deadline (never above the
    configured steps, never below the model's minimum; ``frame.worker.step_choice``). Without a
    deadline, or if the estimate fails, the configured steps: the estimate must never cost a night."""
    if job.deadline is None and not (job_dir / "step_choice.json").exists():
        return config.model.steps
    emit(StageEvent("estimating tonight's steps"))
    try:
        choice = nightly.night_steps_in_child(job_dir, size)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("no step estimate (%s): rendering the configured steps", exc)
        return config.model.steps
    peak = nightly.saved_peak_mb(job_dir)
    log.info("steps: %s%s", choice.sentence(), f" (estimate child peak {peak:.1f} MiB)" if peak else "")
    if choice.slow:
        log.warning("%s (docs/estimate.md, \"Step times this device measured\")", choice.slow)
    emit(StageEvent("generating", step_choice=choice.sentence()))
    return choice.steps


def generate(job: RenderJob, config: Config, choice: ThemeChoice, job_dir: Path, emit: Emit,
             pipeline: PipelineHolder) -> Path:
    """Generate ``image.png`` (resuming from ``JOB_DIR/diffusion``) and record the resolved settings:
    with a queued prompt's own settings (``prompt_settings``), and for "more like this" image-to-image
    from its gallery picture (always painted on the frame: the render server is asked text-to-image only)."""
    out = job_dir / "image.png"
    if out.exists():
        return out
    if config.render.backend in SERVER_BACKENDS and job.variation is None:  # the LAN render server first
        relay = ProgressRelay(job_dir, emit, preview=projection_preview if config.render.previews else None)
        if paint_remotely(job, config, choice, job_dir, emit, relay):
            return out
    pipe = pipeline.get(emit)
    config = _own_settings(job, config, pipe, job_dir)
    model = config.model
    width, height = night_size(config, pipe)
    steps = _steps_for_tonight(job, config, pipe, (width, height), job_dir, emit)
    pipe.use_plan(_tonight_plan(pipe, (width, height), job_dir))
    variation = job.variation
    strength = variation.strength if variation else None
    folders = list(pipe.plan.lora_folders or ())
    prompt, dropped = lora_tags.drop_unknown(choice.prompt, folders)
    if dropped:
        log.warning("LoRA(s) %s not found in %s: painting without them", ", ".join(dropped), ", ".join(folders))
    settings = pipe.settings(prompt, choice.negative_prompt, steps, model.guidance,
                             model.sampler, job.seed, width, height, strength)
    write_json(job_dir / "generation.json", Generation(
        steps=settings.steps, guidance=settings.guidance, sampler=settings.sampler, width=settings.width,
        height=settings.height, model=pipe.info.name).to_json())
    emit(StageEvent("generating", steps=settings.steps))
    previewer = previewer_for(pipe, config.render.previews)
    relay = ProgressRelay(job_dir, emit, preview=previewer)
    try:
        image = pipe.generate(settings, callback=relay, resume_dir=job_dir / "diffusion",
                              init_image=variation.image if variation else None)
    finally:
        if isinstance(previewer, TinyPreviewer):
            previewer.close()
    nightly.keep_step_times(job_dir, job.state_dir, relay.step_seconds)  # logs what they took
    _keep_lora_notes(job_dir, pipe, dropped)
    write_bytes_atomic(out, _png_with_parameters(image))
    return out


def _tonight_plan(pipe: Pipeline, size: tuple[int, int], job_dir: Path) -> RenderPlan:
    """The pipeline's plan with what tonight's estimate saved in the job folder: the read-ahead it
    counted (``frame.diffusion.readahead``) and, when it counted this UNet's guidance peaks, those at
    this size, so the guidance passes run as the estimate counted them."""
    plan = dataclasses.replace(pipe.plan, readahead=nightly.saved_readahead(job_dir))
    peaks = nightly.saved_guidance_peaks(job_dir)
    if peaks is not None:
        plan = dataclasses.replace(plan, counted_guidance=(size[0], size[1], peaks))
    return plan


def _keep_lora_notes(job_dir: Path, pipe: Pipeline, dropped: list[str]) -> None:
    """``JOB_DIR/loras.json``: each LoRA's fate for the picture's details, written before the image (a
    restart after it skips generating). A LoRA left out or matching no layer is a warning in the log."""
    outcome = pipe.lora_outcome
    notes = {name: "not applied: not found" for name in dropped}
    notes.update(outcome.notes())
    for line in outcome.warnings():
        log.warning("%s", line)
    if notes:
        write_json(job_dir / LORAS, notes)


def _own_settings(job: RenderJob, config: Config, pipe: Pipeline, job_dir: Path) -> Config:
    """The configuration with the queued prompt's own settings, or the night's when this model refuses
    them (the reason is kept in ``JOB_DIR/own_settings.json`` for the picture's "why")."""
    own = prompt_settings.with_prompt_settings(config, job.settings)
    if own is config or read_json(job_dir / OWN_SETTINGS):  # none, or refused before a restart
        return config
    problem = prompt_settings.refused(pipe, job.settings, own, night_size(own, pipe))
    if problem is None:
        return own
    write_json(job_dir / OWN_SETTINGS, {"refused": problem})
    return config


# prepare --------------------------------------------------------------------------------------------

def prepare_for_panel(config: Config, image_path: Path, job_dir: Path, emit: Emit) -> Path:
    out = job_dir / "panel.png"
    if out.exists():
        return out
    try:
        import frame.display as display
        from frame.display.device import DisplaySettings
    except ImportError as exc:
        raise StepUnavailable("prepare", f"panel preparation is not available: {exc}") from exc
    emit(StageEvent("preparing for the panel"))
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

def _timed(timings: Timings, name: str, func: Callable[[], Any]) -> Any:
    """Run step ``name``, adding its duration to ``timings``; a failure is re-raised as
    ``StepFailed`` naming the step, with the error chained as its cause."""
    started = time.monotonic()
    try:
        value = func()
    except StepFailed:
        raise  # named where it happened ("load model" while choosing or generating)
    except Exception as exc:
        raise step_failed(name, exc) from exc
    timings[name] = round(timings.get(name, 0.0) + time.monotonic() - started, 3)  # summed over restarts
    return value


def _generation(job_dir: Path) -> Generation | None:
    data = read_json(job_dir / "generation.json")
    return Generation.from_json(data) if data else None


def picture_meta(job: RenderJob, config: Config, choice: ThemeChoice, generation: Generation | None,
                 timings: Timings, job_dir: Path) -> PictureMeta:
    """What the store keeps about tonight's picture."""
    return PictureMeta(
        prompt=choice.prompt, negative_prompt=choice.negative_prompt, theme=choice.theme, style=choice.style,
        origin=choice.origin, seed=job.seed, sampler=generation.sampler if generation else None,
        steps=generation.steps if generation else None, guidance=generation.guidance if generation else None,
        width=generation.width if generation else None, height=generation.height if generation else None,
        # stored and shown: no credentials
        model=redact_url((generation.model if generation else "") or config.model.source),
        why=_with_loras(_with_refusal(why_with_backend(choice.why, job_dir), job_dir), job_dir).to_json(),
        features=choice.features,
        timings=dict(timings))


def _with_refusal(why: Why, job_dir: Path) -> Why:
    refusal = read_json(job_dir / OWN_SETTINGS)
    if not isinstance(refusal, dict):
        return why
    return why.with_details(own_settings=f"painted with the night's settings: {refusal.get('refused')}")


def _with_loras(why: Why, job_dir: Path) -> Why:
    notes = read_json(job_dir / LORAS)
    if not isinstance(notes, dict) or not notes:
        return why
    return why.with_details(loras={str(name): str(note) for name, note in notes.items()})


def run_render(job: RenderJob, config: Config, job_dir: Path, emit: Emit) -> RenderOutput:
    """Run a ``render`` job; return what the daemon needs to publish it."""
    timings: Timings = read_json(job_dir / "timings.json", default={})
    pipeline = PipelineHolder(config)
    choice = _timed(timings, "choose", lambda: choose(job, config, job_dir, emit, pipeline))
    image = _timed(timings, "generate", lambda: generate(job, config, choice, job_dir, emit, pipeline))
    write_json(job_dir / "timings.json", timings)
    panel = _timed(timings, "prepare", lambda: prepare_for_panel(config, image, job_dir, emit))
    write_json(job_dir / "timings.json", timings)
    meta = picture_meta(job, config, choice, _generation(job_dir), timings, job_dir)
    plot = choice.why.plot
    return RenderOutput(image=image, panel=panel, meta=meta, why_plot=job_dir / plot if plot else None,
                        prompt_id=choice.prompt_id, feed_item_id=choice.feed_item_id)


def main(argv: list[str] | None = None) -> int:
    return process.main(argv, "render", run_render)


if __name__ == "__main__":  # run the importable module, so its logger is frame.worker.render
    from frame.worker import render

    sys.exit(render.main())
