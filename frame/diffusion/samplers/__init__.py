"""Samplers: the schedule, the model parameterisation and the update rule, kept apart.

* ``schedule.py`` — training betas and the timesteps/noise levels a sampler visits;
* ``parameterisation.py`` — eps / v / x0 predictions turned into a clean-latent estimate;
* ``base.py`` — the step contract (:class:`Sampler`, :class:`SamplerState`) and seeded noise;
* ``registry.py`` — the sampler table (``@register_sampler``: name, A1111 name, aliases, defaults),
  ``make_sampler`` and the name lookups;
* one module per family: ``euler.py`` (euler, euler_a), ``ddim.py``, ``dpm.py`` (dpm++2m[_karras]),
  ``lcm.py``; importing this package imports them all, which fills the table.

Deterministic samplers match the corresponding diffusers schedulers step for step
(``tests/diffusion/test_samplers_vs_diffusers.py``); stochastic ones match them given the same noise.
"""

from __future__ import annotations

from frame.diffusion.samplers import ddim, dpm, euler, lcm  # noqa: F401  (imported to register their samplers)
from frame.diffusion.samplers.base import NoiseSource, Sampler, SamplerState, StepResult
from frame.diffusion.samplers.registry import (
    DEFAULT_SAMPLER,
    SAMPLERS,
    a1111_name,
    a1111_names,
    frame_name,
    make_sampler,
    resolve_sampler_name,
    sampler_names,
)
from frame.diffusion.samplers.schedule import SchedulerConfig

__all__ = [
    "DEFAULT_SAMPLER", "SAMPLERS", "NoiseSource", "Sampler", "SamplerState", "SchedulerConfig", "StepResult",
    "a1111_name", "a1111_names", "frame_name", "make_sampler", "resolve_sampler_name", "sampler_names",
]
