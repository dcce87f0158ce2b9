"""The render worker's step choice: estimate tonight on this machine, keep what fits the deadline.

Called by ``frame.worker.render.generate`` once per render, after the prompt is chosen. The estimate
runs in a child process (``python -m frame.worker.step_choice JOB_DIR WIDTH HEIGHT``) so that the
memory counting takes (ONNX shape inference holds about 60 MB for the SD 1.5 UNet, 340 MB for
SDXL's) is returned before the UNet loads; the child first checks that the machine has that much
available (``COUNT_BYTES_PER_NODE``) and gives up otherwise. It reads the job's own config.yaml,
counts the model (no weights read), measures this machine for a few seconds unless a recent
measurement covering tonight's step signatures is kept in ``<state_dir>/machine.json``
(``frame.estimate.rates_file``: written by the first night, ``frame config check`` or the settings
page's estimate), chooses (``frame.estimate.choice``), saves the choice in
``JOB_DIR/step_choice.json`` (a restarted worker renders the same step count: the per-step
checkpoints depend on it) and the figures in ``<state_dir>/estimate.json`` for the phone's settings page.

Memory (the Pi twin): the child runs while the render worker waits with the pipeline
open and the daemon beside it, so its peak is part of the night's. On the demo model (x86) it was
187 MiB, 110 of them the machine measurement's element probe (``frame.estimate.machine``), and was
OOM-killed in the Pi twin; with the smaller probe it is about 111 MiB when it measures and the
graphs' count alone (about 75 MiB) when it reuses the kept measurement. The child saves its own peak
(``VmHWM``) in step_choice.json as ``peak_mb``; the render worker logs it.
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frame.config import load_config
from frame.config.schema import Config
from frame.errors import FrameError
from frame.estimate import step_history
from frame.estimate.choice import ESTIMATE_MARGIN, StepChoice, choose_steps
from frame.statefile import read_json, write_json
from frame.worker.embeddings import new_text_tokens, new_texts
from frame.worker.errors import StepFailed

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline
from frame.worker.pipeline import PipelineHolder
from frame.worker.prompt_settings import with_prompt_settings
from frame.worker.records import RenderJob, read_job

log = logging.getLogger(__name__)

CHOICE_FILE = "step_choice.json"
ESTIMATE_FILE = "estimate.json"
MEASURE_SECONDS = 5.0
CHILD_TIMEOUT = 30 * 60
COUNT_BASE_BYTES = 60 << 20
COUNT_BYTES_PER_NODE = 30 << 10  # SDXL UNet: 11,367 nodes counted in 390 MB; SD 1.5: 4,493 in 105 MB


def remaining_fixed_seconds(projection: Any, steps: int) -> float:
    """The night's fixed part still ahead once the prompt is chosen: loads, text encoders, decode."""
    done = projection.phases.get("start", 0.0) + projection.phases.get("choose", 0.0)
    return projection.seconds - done - steps * projection.step_seconds


def saved_choice(job_dir: Path) -> StepChoice | None:
    saved = read_json(Path(job_dir) / CHOICE_FILE)
    if isinstance(saved, dict) and isinstance(saved.get("steps"), int):
        # a choice saved before ``margin`` existed has none: it was chosen without one
        return StepChoice(**{k: saved[k] for k in StepChoice.__dataclass_fields__ if k in saved})
    return None


def saved_guidance_peaks(job_dir: Path) -> tuple[float, float] | None:
    """The (one-pass, two-pass) render peaks in MB tonight's estimate counted for this UNet (None
    without an estimate): ``guidance_plan.choose``'s ``counted``."""
    saved = read_json(Path(job_dir) / CHOICE_FILE)
    peaks = saved.get("guidance_peaks_mb") if isinstance(saved, dict) else None
    if isinstance(peaks, list) and len(peaks) == 2 and all(isinstance(p, (int, float)) for p in peaks):
        return float(peaks[0]), float(peaks[1])
    return None


def saved_readahead(job_dir: Path) -> dict[str, int]:
    """Read-ahead bytes by component tonight's estimate chose (``frame.diffusion.readahead``; empty
    without an estimate: every component keeps the provider's default)."""
    saved = read_json(Path(job_dir) / CHOICE_FILE)
    budgets = saved.get("readahead_bytes") if isinstance(saved, dict) else None
    if not isinstance(budgets, dict):
        return {}
    return {str(name): int(size) for name, size in budgets.items()
            if isinstance(size, int) and not isinstance(size, bool) and size > 0}


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def own_peak_mb() -> float | None:
    """This process's own peak resident memory (``VmHWM``) in MiB; None where /proc has none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def saved_peak_mb(job_dir: Path) -> float | None:
    """The step-choice child's own peak as it saved it (None: not saved)."""
    saved = read_json(Path(job_dir) / CHOICE_FILE)
    peak = saved.get("peak_mb") if isinstance(saved, dict) else None
    return float(peak) if isinstance(peak, (int, float)) else None


def check_memory_for_counting(pipe: Pipeline) -> None:
    """FrameError if counting the UNet would not fit in the memory available now."""
    from frame.engine.model import read_structure

    nodes = len(read_structure(pipe.unet_source, http=pipe.http).nodes)
    needed = COUNT_BASE_BYTES + COUNT_BYTES_PER_NODE * nodes
    free = available_bytes()
    if free is not None and needed > free:
        raise FrameError(f"counting this model's {nodes}-node UNet needs about {needed >> 20} MB, "
                         f"{free >> 20} MB are available")


def night_steps(config: Config, pipe: Pipeline, size: tuple[int, int], deadline: float | None, job_dir: Path,
                state_dir: Path | None = None, now: float | None = None, texts: int | None = None,
                tokens: int | None = None) -> StepChoice | None:
    """Tonight's step choice (saved in ``job_dir``), or None without a deadline: configured steps.
    ``texts``: how many texts tonight's choice embedded (None: every text the taste settings name),
    ``tokens``: the most token positions one of them took (None: 77).
    Runs in the current process (the child's work; tests call it directly)."""
    saved = saved_choice(job_dir)
    if saved is not None or deadline is None:
        return saved
    from frame.estimate.configured import estimate_config
    from frame.estimate.report import to_dict

    result = estimate_config(config, pipe=pipe, size=size, measure_seconds=MEASURE_SECONDS, alternative=False,
                             texts=texts, choose_tokens=tokens, rates_dir=state_dir)
    estimate = result.estimate
    here = estimate.here
    available = deadline - (time.time() if now is None else now)
    key = step_history.config_key(config, size, estimate.plan)
    kept = step_history.load(Path(state_dir)).get(key, []) if state_dir is not None else []
    learned = step_history.learned_step(here.step_seconds, kept)
    fixed = remaining_fixed_seconds(here, estimate.plan.steps)
    if learned.nights:  # measured steps, the estimate's fixed part with its own margin
        choice = choose_steps(estimate.plan.steps, estimate.plan.min_steps, fixed, learned.step_seconds, available,
                              learned.margin, ESTIMATE_MARGIN)
    else:  # a first night: the estimate alone, as ever
        choice = choose_steps(estimate.plan.steps, estimate.plan.min_steps, fixed, here.step_seconds, available)
    from frame.estimate.pi import LABEL

    slow = step_history.slow_sentence(learned.measured, estimate.projections[1].step_seconds, LABEL)
    choice = dataclasses.replace(choice, learned_nights=learned.nights, slow=slow)
    # the UNet's own peaks at tonight's size: the render's guidance mode follows them (saved_guidance_peaks);
    # the key and the estimate's step time: the render keeps tonight's measured steps under them (keep_step_times)
    write_json(job_dir / CHOICE_FILE, {**choice.to_dict(), "guidance_peaks_mb": estimate.plan.counted_peaks_mb,
                                       "readahead_bytes": estimate.plan.readahead, "peak_mb": own_peak_mb(),
                                       "history_key": key, "estimated_step_seconds": here.step_seconds,
                                       "pi_step_seconds": estimate.projections[1].step_seconds})
    if state_dir is not None:
        write_json(Path(state_dir) / ESTIMATE_FILE, {**to_dict(result, "tonight's render", config),
                                                      "step_choice": choice.to_dict()})
    return choice


def keep_step_times(job_dir: Path, state_dir: Path | None, step_seconds: list[float]) -> step_history.Night | None:
    """Keep tonight's measured steps under the key tonight's choice saved (nothing without a step
    choice or a state folder) and say in the night's log what they took: a warning when they were
    ``step_history.SLOW_RATIO`` slower than the Pi projection, so even a first slow night says so."""
    saved = read_json(Path(job_dir) / CHOICE_FILE)
    key = saved.get("history_key") if isinstance(saved, dict) else None
    if not isinstance(key, str) or state_dir is None:
        return None
    night = step_history.record(Path(state_dir), key, step_seconds)
    if night is None:
        return None
    estimated, pi_step = saved.get("estimated_step_seconds"), saved.get("pi_step_seconds")
    against = f" (the estimate: {estimated:.3g} s)" if isinstance(estimated, (int, float)) else ""
    log.info("tonight's %d measured steps took %.3g s each (median)%s", night.steps, night.step_seconds, against)
    if isinstance(pi_step, (int, float)) and not isinstance(pi_step, bool):
        from frame.estimate.pi import LABEL

        slow = step_history.slow_sentence(night.step_seconds, float(pi_step), LABEL, when="tonight")
        if slow:
            log.warning("%s (docs/estimate.md, \"Step times this device measured\")", slow)
    return night


def night_steps_in_child(job_dir: Path, size: tuple[int, int], timeout: float = CHILD_TIMEOUT) -> StepChoice:
    """Run ``night_steps`` in a child process for the job in ``job_dir``; FrameError with the child's
    last line when it fails."""
    saved = saved_choice(job_dir)
    if saved is not None:
        return saved
    command = [sys.executable, "-m", "frame.worker.step_choice", str(job_dir), str(size[0]), str(size[1])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise FrameError(f"the estimate took more than {timeout:.0f} s") from exc
    choice = saved_choice(job_dir)
    if done.returncode != 0 or choice is None:
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        raise FrameError(lines[-1] if lines else f"the estimate exited with status {done.returncode}")
    return choice


def main(argv: list[str] | None = None) -> int:
    """Child entry point: JOB_DIR WIDTH HEIGHT (config and deadline from the job folder)."""

    args = sys.argv[1:] if argv is None else argv
    job_dir, size = Path(args[0]), (int(args[1]), int(args[2]))
    config = load_config(job_dir / "config.yaml", environ={})  # resolved by the daemon, as the worker reads it
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        job = read_job(job_dir)
        if not isinstance(job, RenderJob):
            raise FrameError(f"no readable render job in {job_dir}")
        if not (job_dir / "own_settings.json").exists():  # the owner's steps cap the choice (render.generate)
            config = with_prompt_settings(config, job.settings)
        pipe = PipelineHolder(config).get(lambda event: None)
        check_memory_for_counting(pipe)
        texts = 0 if job.choice is not None else new_texts(job_dir)  # a queued prompt embeds nothing
        night_steps(config, pipe, size, job.deadline, job_dir, job.state_dir, texts=texts,
                    tokens=new_text_tokens(job_dir))
    except Exception as exc:  # noqa: BLE001 - one line for the parent, which falls back
        cause = exc.cause if isinstance(exc, StepFailed) else exc
        print(f"{type(cause).__name__}: {cause}" if not isinstance(cause, FrameError) else str(cause), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
