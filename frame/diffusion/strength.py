"""Image-to-image strength: which steps of the schedule run, as diffusers' ``get_timesteps``.

With ``steps`` steps and strength ``s`` the sampler builds its usual ``steps``-step schedule and
runs only its last ``int(steps * s)`` steps (Python's float product, truncated, exactly as diffusers
and AUTOMATIC1111 count them): 20 steps at 0.6 run 12. The start latent is the init image's latent
noised to the level of the first step that runs (``Sampler.add_noise``).
"""

from __future__ import annotations

import math

from frame.errors import UsageError


def check_strength(strength: object) -> float:
    """``strength`` as a float in (0, 1], or a UsageError saying what is allowed."""
    if isinstance(strength, bool) or not isinstance(strength, (int, float)) or not 0.0 < float(strength) <= 1.0 \
            or math.isnan(float(strength)):
        raise UsageError(f"strength must be a number greater than 0 and at most 1 (0.3-0.8 keeps the picture "
                         f"recognisable), got {strength!r}")
    return float(strength)


def steps_run(steps: int, strength: float) -> int:
    """How many denoising steps image-to-image runs: ``min(int(steps * strength), steps)``."""
    return min(int(steps * strength), steps)


def first_step(steps: int, strength: float) -> int:
    """Index of the first step that runs; a UsageError when the product leaves no step at all."""
    count = steps_run(steps, strength)
    if count < 1:
        raise UsageError(f"strength {strength:g} with {steps} steps runs no denoising step "
                         f"(int(steps x strength) = 0): use at least {fewest_steps(strength)} steps")
    return steps - count


def fewest_steps(strength: float, at_least: int = 1) -> int:
    """The smallest step count ≥ ``at_least`` that runs at least one step at ``strength``."""
    steps = max(1, at_least, math.ceil(1.0 / strength) - 1)  # float rounding: at most a few more below
    while steps_run(steps, strength) < 1:
        steps += 1
    return steps
