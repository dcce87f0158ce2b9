"""Tonight's step count: the largest that fits the time left before the deadline.

The night's length is ``fixed + steps × step`` (``frame.estimate.night.Projection``: the fixed part is
the worker start, the loads, the text encoders, the prompt choice and the VAE decode). The choice
never goes above the configured (or the model's default) steps and never below the model's
minimum: 1 for few-step distilled models (Turbo), 4 with the LCM sampler, 10 otherwise (OnnxStream
publishes its Pi timings at 10 steps; fewer with euler_a leave visibly unfinished pictures). When
even the minimum does not fit, the minimum is rendered anyway and the reason says it may (or, past
the deadline even without the margin, will likely) miss the deadline.

The chosen night must fit with room for the estimate's own error (``ESTIMATE_MARGIN``): the deadline
stops a render that is still running, and that loses the whole night, so a projection that only just
fits is not good enough when the projection itself runs short.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

MIN_STEPS_TURBO = 1
MIN_STEPS_LCM = 4
MIN_STEPS = 10
# The estimate against measured renders on a quiet machine (docs/estimate.md, "This machine: estimate
# against a measured render"): SD 1.5 fp16 -11 %, uint8 -10 % of the render's CPU time; the
# accuracy target is 15 %. A night is chosen so that its projection stretched by this share still ends
# before the deadline: a night that takes 15 % longer than projected still finishes.
ESTIMATE_MARGIN = 0.15


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
    margin: float = 0.0  # the share of the projection kept free for the estimate's error
    fixed_margin: float | None = None  # the fixed part's own share when it differs (None: ``margin``)
    learned_nights: int = 0  # earlier nights whose measured step times tonight's step time uses
    slow: str = ""  # the sentence saying this device is slower than the Pi projection (step_history)

    @property
    def reduced(self) -> bool:
        return self.steps < self.configured

    def sentence(self) -> str:
        """The choice in one plain sentence, with the slow-device sentence joined when there is one."""
        return f"{self._choice_sentence()}; {self.slow}" if self.slow else self._choice_sentence()

    def _choice_sentence(self) -> str:
        left = format_duration(self.available_seconds)
        night = format_duration(self.projected_seconds)
        spare = f" with {self.margin:.0%} to spare" if self.margin else ""
        if self.learned_nights:
            spare += f" (steps timed as on {self.learned_nights} earlier night{'s' if self.learned_nights > 1 else ''})"
        if not self.fits:
            need = f" (+{self.margin:.0%} for the estimate's error)" if self.margin else ""
            likely = "may" if self.projected_seconds <= self.available_seconds else "will likely"
            return (f"{self.steps} steps (the minimum): even they need about {night}{need}, more than the "
                    f"{left} left before the deadline; the picture {likely} miss it")
        if self.reduced:
            return (f"{self.steps} of {self.configured} steps: about {night}, within the {left} left before "
                    f"the deadline{spare} ({self.configured} would not fit)")
        return f"all {self.steps} steps: about {night}, within the {left} left before the deadline{spare}"

    def to_dict(self) -> dict:
        return {**asdict(self), "sentence": self.sentence()}


def choose_steps(configured: int, minimum: int, fixed_seconds: float, step_seconds: float,
                 available_seconds: float, margin: float = ESTIMATE_MARGIN,
                 fixed_margin: float | None = None) -> StepChoice:
    """The largest step count in ``[minimum, configured]`` whose projected night, stretched by
    ``margin`` (a share: the estimate's error), fits ``available_seconds``. ``fixed_margin``: the
    fixed part's own share when the steps' differs (``frame.estimate.step_history``: measured steps,
    estimated loads and decode); None stretches the whole night by ``margin``."""
    minimum = max(1, min(minimum, configured))
    if fixed_margin is None:  # the whole night stretched alike (kept exact: a first night is unchanged)
        usable = available_seconds / (1.0 + margin)
        fitting = configured if step_seconds <= 0 else int((usable - fixed_seconds) // step_seconds)
    else:
        fixed_need = fixed_seconds * (1.0 + fixed_margin)
        fitting = configured if step_seconds <= 0 else \
            int((available_seconds - fixed_need) // (step_seconds * (1.0 + margin)))
    steps = max(minimum, min(configured, fitting))
    projected = fixed_seconds + steps * step_seconds
    if fixed_margin is None:
        fits = projected <= usable
    else:
        fits = fixed_need + steps * step_seconds * (1.0 + margin) <= available_seconds
    return StepChoice(steps, configured, minimum, fits, projected, available_seconds, margin, fixed_margin)


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
