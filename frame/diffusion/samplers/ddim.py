"""DDIM (Song et al. 2020, eq. 12 with eta = 0), mirroring diffusers' DDIMScheduler.

Works on the variance-preserving latent ``sqrt(a) * x0 + sqrt(1 - a) * eps``. Like diffusers, the
"previous" timestep is ``t - num_train_timesteps // steps`` whatever the spacing, and the step past
timestep 0 uses ``final_alpha_cumprod`` (1.0 when ``set_alpha_to_one``).
"""

from __future__ import annotations

import numpy as np

from frame.diffusion.samplers.base import Sampler, SamplerState, StepResult
from frame.diffusion.samplers.parameterisation import predict_eps, predict_x0
from frame.diffusion.samplers.registry import register_sampler
from frame.diffusion.samplers.schedule import LINEAR_BETAS, SchedulerConfig, alphas_cumprod, spaced_timesteps


@register_sampler("ddim", a1111="DDIM", class_defaults={
    **LINEAR_BETAS, "timestep_spacing": "leading", "clip_sample": True, "set_alpha_to_one": True})
class DDIM(Sampler):
    """Deterministic DDIM; clips x0 to ``clip_sample_range`` when the config asks for it."""


    def __init__(self, config: SchedulerConfig, steps: int) -> None:
        self.config = config
        self.alphas_cumprod = alphas_cumprod(config, finite_terminal_sigma=False)
        self.final_alpha_cumprod = np.float32(1.0) if config.set_alpha_to_one else self.alphas_cumprod[0]
        self.timesteps = spaced_timesteps(config, steps, "ddim")
        self.stride = config.num_train_timesteps // steps
        self.init_noise_sigma = 1.0

    def add_noise(self, original: np.ndarray, noise: np.ndarray, index: int) -> np.ndarray:
        """DDPM forward process at the step's timestep: ``sqrt(a) * x0 + sqrt(1 - a) * noise``."""
        a_t = self.alphas_cumprod[int(self.timesteps[index])]
        return (a_t ** np.float32(0.5) * original + (np.float32(1) - a_t) ** np.float32(0.5) * noise).astype(np.float32)

    def step(self, index: int, output: np.ndarray, sample: np.ndarray, state: SamplerState) -> StepResult:
        t = int(self.timesteps[index])
        previous = t - self.stride
        a_t = self.alphas_cumprod[t]
        a_prev = self.alphas_cumprod[previous] if previous >= 0 else self.final_alpha_cumprod
        alpha, sigma = a_t ** np.float32(0.5), (np.float32(1) - a_t) ** np.float32(0.5)
        # 1. predicted x0 and noise
        x0 = predict_x0(self.config.prediction_type, output, sample, alpha, sigma)
        eps = predict_eps(self.config.prediction_type, output, sample, alpha, sigma)
        # 2. optional clipping of x0 (eps is not recomputed, as in diffusers)
        if self.config.clip_sample:
            limit = self.config.clip_sample_range
            x0 = np.clip(x0, -limit, limit)
        # 3. x_{t-1} = sqrt(a_prev) * x0 + sqrt(1 - a_prev) * eps  (eta = 0: no fresh noise)
        direction = (np.float32(1) - a_prev) ** np.float32(0.5) * eps
        return StepResult((a_prev ** np.float32(0.5) * x0 + direction).astype(np.float32), x0)
