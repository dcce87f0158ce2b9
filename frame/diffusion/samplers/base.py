"""The one step contract every sampler follows, and the seeded noise that ancestral samplers draw.

The third sampler idea, the loop, lives in the pipeline and only ever does::

    x = init_noise * sampler.init_noise_sigma
    for i in range(sampler.steps):
        output = model(sampler.scale_input(x, i), sampler.timesteps[i])
        x = sampler.step(i, output, x, state).sample

A :class:`Sampler` holds nothing that changes while sampling: the schedule (timesteps, noise levels) is
fixed at construction and everything that evolves lives in :class:`SamplerState` (the multistep history
and the random generator), which serialises to plain arrays and JSON so a render can resume after a
power cut and continue bit for bit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from frame.diffusion.samplers.schedule import SchedulerConfig


@dataclass(frozen=True)
class StepResult:
    """The latent for the next step and the model's current clean-latent estimate (used for previews)."""

    sample: np.ndarray
    denoised: np.ndarray


NoiseState = dict[str, object]  # a seeded stream's JSON-able state, saved with every resume checkpoint


class Noise(Protocol):
    """Where ancestral samplers get their fresh noise from."""

    def normal(self, shape: tuple[int, ...]) -> np.ndarray: ...


class SeededNoise(Noise, Protocol):
    """A render's seeded stream (``frame.diffusion.noise``): its draws, and the state a resume
    checkpoint saves and puts back, so a resumed render draws what the uncut one would have."""

    def get_state(self) -> NoiseState: ...

    def set_state(self, state: NoiseState) -> None: ...


class NoiseSource:
    """Seeded standard-normal float32 noise from numpy's PCG64 generator: ``model.noise: frame``.

    frame's own source, kept as the default so that stored seeds paint what they painted; torch's and
    A1111's sources, which make a seed paint what it paints in diffusers, ComfyUI or A1111, are in
    ``frame.diffusion.noise``. The generator state is a small JSON-able dict, saved with every resume
    checkpoint.
    """

    def __init__(self, seed: int) -> None:
        self._bits = np.random.PCG64(seed)
        self._rng = np.random.Generator(self._bits)

    def normal(self, shape: tuple[int, ...]) -> np.ndarray:
        return self._rng.standard_normal(shape, dtype=np.float32)

    def get_state(self) -> NoiseState:
        return self._bits.state

    def set_state(self, state: NoiseState) -> None:
        self._bits.state = state


@dataclass
class SamplerState:
    """Everything that changes while sampling besides the latent: history arrays and the noise source."""

    noise: Noise
    history: dict[str, np.ndarray] = field(default_factory=dict)


class Sampler(ABC):
    """A fixed schedule plus one update rule.

    Subclasses set ``name``, ``config``, ``timesteps`` (one model timestep per step, int64 or float32 like
    the matching diffusers scheduler) and ``init_noise_sigma`` in ``__init__``.
    """

    name: str
    config: SchedulerConfig
    timesteps: np.ndarray
    init_noise_sigma: float
    #: whether ``step`` draws from ``state.noise`` (so the seed matters beyond the initial latent)
    stochastic: bool = False

    @property
    def steps(self) -> int:
        return len(self.timesteps)

    def scale_input(self, sample: np.ndarray, index: int) -> np.ndarray:
        """The UNet input for ``sample`` at step ``index``; identity for variance-preserving samplers."""
        return sample

    @abstractmethod
    def step(self, index: int, output: np.ndarray, sample: np.ndarray, state: SamplerState) -> StepResult:
        """Advance ``sample`` from step ``index`` to ``index + 1`` given the (guided) model output."""

    def add_noise(self, original: np.ndarray, noise: np.ndarray, index: int) -> np.ndarray:
        """``original`` (a clean latent) noised to the level of step ``index``: image-to-image starts
        there. Each family uses the noise convention of its own update rule, as the diffusers
        scheduler's ``add_noise`` with ``set_begin_index(index)``."""
        raise NotImplementedError(f"sampler {self.name} cannot start from an image")

    def describe(self) -> str:
        return f"{self.name} ({self.steps} steps, {self.config.prediction_type}, {self.config.timestep_spacing})"
