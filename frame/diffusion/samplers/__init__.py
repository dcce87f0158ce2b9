"""Samplers: the schedule, the model parameterisation and the update rule, kept apart.

* ``schedule.py`` — training betas and the timesteps/noise levels a sampler visits;
* ``parameterisation.py`` — eps / v / x0 predictions turned into a clean-latent estimate;
* ``base.py`` — the step contract (:class:`Sampler`, :class:`SamplerState`) and seeded noise;
* one module per family: ``euler.py`` (euler, euler_a), ``ddim.py``, ``dpm.py`` (dpm++2m[_karras]),
  ``lcm.py``.

Deterministic samplers match the corresponding diffusers schedulers step for step
(``tests/diffusion/test_samplers_vs_diffusers.py``); stochastic ones match them given the same noise.
"""

from __future__ import annotations

import difflib
from typing import Any

from frame.diffusion.samplers.base import NoiseSource, Sampler, SamplerState, StepResult
from frame.diffusion.samplers.ddim import DDIM
from frame.diffusion.samplers.dpm import DPMSolver2M
from frame.diffusion.samplers.euler import Euler, EulerAncestral
from frame.diffusion.samplers.lcm import LCM
from frame.diffusion.samplers.schedule import SchedulerConfig
from frame.errors import UsageError

__all__ = [
    "DEFAULT_SAMPLER", "SAMPLER_NAMES", "NoiseSource", "Sampler", "SamplerState", "SchedulerConfig",
    "StepResult", "make_sampler", "resolve_sampler_name",
]

DEFAULT_SAMPLER = "euler_a"
SAMPLER_NAMES = ("euler_a", "euler", "ddim", "dpm++2m", "dpm++2m_karras", "lcm")
ALIASES = {
    "euler_ancestral": "euler_a",
    "k_euler_a": "euler_a",
    "k_euler": "euler",
    "dpmpp_2m": "dpm++2m",
    "dpm++_2m": "dpm++2m",
    "dpmpp_2m_karras": "dpm++2m_karras",
    "dpm++_2m_karras": "dpm++2m_karras",
    "dpm++2m_k": "dpm++2m_karras",
}

_LINEAR = {"beta_start": 0.0001, "beta_end": 0.02, "beta_schedule": "linear", "steps_offset": 0}
# Defaults of the diffusers class each sampler mirrors, for keys scheduler_config.json leaves out.
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "euler": {**_LINEAR, "timestep_spacing": "linspace"},
    "euler_a": {**_LINEAR, "timestep_spacing": "linspace", "use_karras_sigmas": False},
    "ddim": {**_LINEAR, "timestep_spacing": "leading", "clip_sample": True, "set_alpha_to_one": True},
    "dpm++2m": {**_LINEAR, "timestep_spacing": "linspace"},
    "dpm++2m_karras": {**_LINEAR, "timestep_spacing": "linspace"},
    "lcm": {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "steps_offset": 0,
            "timestep_spacing": "leading", "clip_sample": False, "set_alpha_to_one": True},
}


def resolve_sampler_name(name: str | None) -> str:
    """Canonical sampler name; ``None`` gives the default; unknown names raise with a suggestion."""
    if name is None:
        return DEFAULT_SAMPLER
    key = name.strip().lower().replace(" ", "_").replace("-", "_")
    key = ALIASES.get(key, key)
    if key in SAMPLER_NAMES:
        return key
    close = difflib.get_close_matches(key, [*SAMPLER_NAMES, *ALIASES], n=1, cutoff=0.5)
    hint = f" — did you mean {ALIASES.get(close[0], close[0])!r}?" if close else ""
    raise UsageError(f"unknown sampler {name!r}{hint} (known: {', '.join(SAMPLER_NAMES)})")


def make_sampler(name: str | None, scheduler_config: dict[str, Any], steps: int) -> Sampler:
    """Build sampler ``name`` for ``steps`` steps from a ``scheduler_config.json`` dictionary."""
    canonical = resolve_sampler_name(name)
    config = SchedulerConfig.from_json(scheduler_config, CLASS_DEFAULTS[canonical])
    config.check()
    if not isinstance(steps, int) or not 1 <= steps <= config.num_train_timesteps:
        raise UsageError(f"steps must be an integer from 1 to {config.num_train_timesteps}, got {steps!r}")
    if canonical == "euler_a":
        return EulerAncestral(config, steps)
    if canonical == "euler":
        return Euler(config, steps)
    if canonical == "ddim":
        return DDIM(config, steps)
    if canonical == "lcm":
        return LCM(config, steps)
    return DPMSolver2M(config, steps, karras=canonical == "dpm++2m_karras")
