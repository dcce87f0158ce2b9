"""Latent Consistency Model sampling (Luo et al. 2023, Algorithm 1), mirroring diffusers' LCMScheduler.

Each step maps the latent straight to a consistency-function estimate of x0 (``c_skip * x + c_out * x0``
with the discrete boundary-condition scalings), then, except on the last step, re-noises it to the
next timestep with fresh noise from ``state.noise``. With one step it is deterministic.
"""

from __future__ import annotations

import numpy as np

from frame.diffusion.samplers.base import Sampler, SamplerState, StepResult
from frame.diffusion.samplers.parameterisation import predict_x0
from frame.diffusion.samplers.registry import register_sampler
from frame.diffusion.samplers.schedule import SchedulerConfig, alphas_cumprod, lcm_timesteps

SIGMA_DATA = np.float32(0.5)
ONE = np.float32(1)
HALF = np.float32(0.5)


@register_sampler("lcm", a1111="LCM", class_defaults={
    "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "steps_offset": 0,
    "timestep_spacing": "leading", "clip_sample": False, "set_alpha_to_one": True})
class LCM(Sampler):
    """Few-step sampler for LCM-distilled models (and the LCM-LoRA family)."""


    def __init__(self, config: SchedulerConfig, steps: int) -> None:
        self.config = config
        self.alphas_cumprod = alphas_cumprod(config, finite_terminal_sigma=False)
        self.final_alpha_cumprod = np.float32(1.0) if config.set_alpha_to_one else self.alphas_cumprod[0]
        self.timesteps = lcm_timesteps(config, steps)
        self.init_noise_sigma = 1.0
        self.stochastic = steps > 1

    def _boundary_scalings(self, t: int) -> tuple[np.float32, np.float32]:
        """c_skip and c_out of the consistency parameterisation at timestep ``t``."""
        scaled = np.float32(t) * np.float32(self.config.timestep_scaling)
        c_skip = SIGMA_DATA**2 / (scaled**2 + SIGMA_DATA**2)
        c_out = scaled / (scaled**2 + SIGMA_DATA**2) ** HALF
        return c_skip, c_out

    def add_noise(self, original: np.ndarray, noise: np.ndarray, index: int) -> np.ndarray:
        """DDPM forward process at the step's timestep: ``sqrt(a) * x0 + sqrt(1 - a) * noise``."""
        a_t = self.alphas_cumprod[int(self.timesteps[index])]
        return (a_t ** np.float32(0.5) * original + (np.float32(1) - a_t) ** np.float32(0.5) * noise).astype(np.float32)

    def step(self, index: int, output: np.ndarray, sample: np.ndarray, state: SamplerState) -> StepResult:
        t = int(self.timesteps[index])
        last = index == self.steps - 1
        t_next = t if last else int(self.timesteps[index + 1])
        a_t = self.alphas_cumprod[t]
        a_next = self.alphas_cumprod[t_next] if t_next >= 0 else self.final_alpha_cumprod
        # 1. predicted x0 from the model output
        x0 = predict_x0(self.config.prediction_type, output, sample, a_t**HALF, (ONE - a_t) ** HALF)
        if self.config.clip_sample:
            x0 = np.clip(x0, -self.config.clip_sample_range, self.config.clip_sample_range)
        # 2. consistency-function output
        c_skip, c_out = self._boundary_scalings(t)
        denoised = (c_out * x0 + c_skip * sample).astype(np.float32)
        if last:
            return StepResult(denoised, denoised)
        # 3. re-noise to the next timestep
        noise = state.noise.normal(sample.shape)
        moved = a_next**HALF * denoised + (ONE - a_next) ** HALF * noise
        return StepResult(moved.astype(np.float32), denoised)
