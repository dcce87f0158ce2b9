"""The render worker's step choice: estimate tonight on this machine, keep what fits the deadline.

Called by ``frame.daemon.steps.generate`` once per render, after the prompt is chosen: the estimate
runs on the loaded pipeline (no weights read; a three-second measurement), the choice
(``frame.estimate.choice``) is saved in ``JOB_DIR/step_choice.json`` so a restarted worker renders
the same step count (the per-step checkpoints depend on it), and the figures go to
``<state_dir>/estimate.json`` for the phone's settings page.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from frame.daemon.statefile import read_json, write_json
from frame.estimate.choice import StepChoice, choose_steps

log = logging.getLogger(__name__)

CHOICE_FILE = "step_choice.json"
ESTIMATE_FILE = "estimate.json"
MEASURE_SECONDS = 3.0


def remaining_fixed_seconds(projection: Any, steps: int) -> float:
    """The night's fixed part still ahead once the prompt is chosen: loads, text encoders, decode."""
    done = projection.phases.get("start", 0.0) + projection.phases.get("choose", 0.0)
    return projection.seconds - done - steps * projection.step_seconds


def night_steps(config: Any, pipe: Any, size: tuple[int, int], deadline: float | None, job_dir: Path,
                state_dir: Path | None = None, now: float | None = None) -> StepChoice | None:
    """Tonight's step choice (saved in ``job_dir``), or None without a deadline: configured steps."""
    saved = read_json(job_dir / CHOICE_FILE)
    if isinstance(saved, dict) and isinstance(saved.get("steps"), int):
        return StepChoice(**{k: saved[k] for k in StepChoice.__dataclass_fields__})
    if deadline is None:
        return None
    from frame.estimate.configured import estimate_config
    from frame.estimate.report import to_dict

    result = estimate_config(config, pipe=pipe, size=size, measure_seconds=MEASURE_SECONDS)
    estimate = result.estimate
    here = estimate.here
    available = deadline - (time.time() if now is None else now)
    choice = choose_steps(estimate.plan.steps, estimate.plan.min_steps,
                          remaining_fixed_seconds(here, estimate.plan.steps), here.step_seconds, available)
    write_json(job_dir / CHOICE_FILE, choice.to_dict())
    if state_dir is not None:
        write_json(Path(state_dir) / ESTIMATE_FILE, {**to_dict(result, "tonight's render"),
                                                      "step_choice": choice.to_dict()})
    return choice
