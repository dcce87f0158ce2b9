"""Tonight's step count: the largest that fits the time left before the deadline.

The night's length is ``fixed + steps × step`` (``frame.estimate.night.Projection``: the fixed part is
the worker start, the loads, the text encoders, the prompt choice and the VAE decode). The choice
never goes above the configured (or the model's default) steps and never below the model's
minimum: 1 for few-step distilled models (Turbo), 4 with the LCM sampler, 10 otherwise (OnnxStream
publishes its Pi timings at 10 steps; fewer with euler_a leave visibly unfinished pictures). When
even the minimum does not fit, the minimum is rendered anyway and the reason says it will likely
miss the deadline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

MIN_STEPS_TURBO = 1
MIN_STEPS_LCM = 4
MIN_STEPS = 10


def minimum_steps(turbo: bool, sampler: str, configured: int) -> int:
    """The model's minimum (see the module docstring), never above what is configured."""
    floor = MIN_STEPS_TURBO if turbo else MIN_STEPS_LCM if sampler == "lcm" else MIN_STEPS
    return max(1, min(floor, configured))


@dataclass(frozen=True)
class StepChoice:
    steps: int
    configured: int
    minimum: int
    fits: bool
    projected_seconds: float
    available_seconds: float

    @property
    def reduced(self) -> bool:
        return self.steps < self.configured

    def sentence(self) -> str:
        left = format_duration(self.available_seconds)
        night = format_duration(self.projected_seconds)
        if not self.fits:
            return (f"{self.steps} steps (the minimum): even they need about {night}, more than the {left} "
                    "left before the deadline; the picture will likely miss it")
        if self.reduced:
            return (f"{self.steps} of {self.configured} steps: about {night}, within the {left} left before "
                    f"the deadline ({self.configured} would not fit)")
        return f"all {self.steps} steps: about {night}, within the {left} left before the deadline"

    def to_dict(self) -> dict:
        return {**asdict(self), "sentence": self.sentence()}


def choose_steps(configured: int, minimum: int, fixed_seconds: float, step_seconds: float,
                 available_seconds: float) -> StepChoice:
    """The largest step count in ``[minimum, configured]`` whose projected night fits ``available_seconds``."""
    minimum = max(1, min(minimum, configured))
    if step_seconds <= 0:
        fitting = configured
    else:
        fitting = int((available_seconds - fixed_seconds) // step_seconds)
    steps = max(minimum, min(configured, fitting))
    projected = fixed_seconds + steps * step_seconds
    return StepChoice(steps, configured, minimum, projected <= available_seconds, projected, available_seconds)


def format_duration(seconds: float) -> str:
    if seconds < 10:
        return f"{max(0.0, seconds):.1f} s"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"
