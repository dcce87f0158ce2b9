"""Euler and Euler ancestral samplers (Karras et al. 2022, Algorithm 2; k-diffusion ``sample_euler[_ancestral]``).

They integrate the probability-flow ODE in the variance-exploding parameterisation: the latent is
``x0 + s * eps`` with noise level ``s``, the UNet sees ``x / sqrt(s**2 + 1)``. Schedules and update rules
mirror diffusers' EulerDiscreteScheduler and EulerAncestralDiscreteScheduler (float32 sigmas).
"""

from __future__ import annotations

import numpy as np

from frame.diffusion.samplers.base import Sampler, SamplerState, StepResult
from frame.diffusion.samplers.parameterisation import predict_x0_k
from frame.diffusion.samplers.registry import register_sampler
from frame.diffusion.samplers.schedule import (
    LINEAR_BETAS,
    SchedulerConfig,
    alphas_cumprod,
    interp_sigmas,
    karras_sigmas,
    sigma_to_t,
    spaced_timesteps,
    train_sigmas,
)


@register_sampler("euler", a1111="Euler", aliases=("k_euler",),
                  class_defaults={**LINEAR_BETAS, "timestep_spacing": "linspace"})
class Euler(Sampler):
    """First-order ODE steps; deterministic. Honours ``use_karras_sigmas`` like diffusers' Euler."""


    def __init__(self, config: SchedulerConfig, steps: int) -> None:
        self.config = config
        table = train_sigmas(alphas_cumprod(config))
        timesteps = spaced_timesteps(config, steps, "k")
        sigmas = interp_sigmas(timesteps, table)
        if config.use_karras_sigmas and self.name == "euler":
            sigmas = karras_sigmas(float(sigmas[-1]), float(sigmas[0]), steps)
            timesteps = sigma_to_t(sigmas, np.log(table.astype(np.float64))).astype(np.float32)
        self.timesteps = timesteps.astype(np.float32)
        self.sigmas = np.append(sigmas, 0.0).astype(np.float32)
        top = self.sigmas.max()
        spacing_starts_at_top = config.timestep_spacing in ("linspace", "trailing")
        self.init_noise_sigma = float(top if spacing_starts_at_top else (top**2 + np.float32(1)) ** np.float32(0.5))

    def scale_input(self, sample: np.ndarray, index: int) -> np.ndarray:
        sigma = self.sigmas[index]
        return sample / ((sigma**2 + np.float32(1)) ** np.float32(0.5))

    def add_noise(self, original: np.ndarray, noise: np.ndarray, index: int) -> np.ndarray:
        """Variance exploding: ``x0 + sigma * noise`` (not divided by anything, unlike txt2img's start)."""
        return (original + noise * self.sigmas[index]).astype(np.float32)

    def step(self, index: int, output: np.ndarray, sample: np.ndarray, state: SamplerState) -> StepResult:
        sigma, sigma_next = self.sigmas[index], self.sigmas[index + 1]
        # 1. predicted clean latent x0 from the model output
        denoised = predict_x0_k(self.config.prediction_type, output, sample, sigma)
        # 2. ODE derivative dx/dsigma = (x - x0) / sigma
        derivative = (sample - denoised) / sigma
        # 3. Euler step to the next noise level
        return StepResult((sample + derivative * (sigma_next - sigma)).astype(np.float32), denoised)


@register_sampler("euler_a", a1111="Euler a", aliases=("euler_ancestral", "k_euler_a"),
                  class_defaults={**LINEAR_BETAS, "timestep_spacing": "linspace", "use_karras_sigmas": False})
class EulerAncestral(Euler):
    """Euler step to a lower noise level ``sigma_down``, then fresh noise back up to ``sigma_next``.

    frame's default sampler. Noise comes from ``state.noise`` (the seed's stream, ``model.noise``), drawn once per step.
    """

    stochastic = True

    def step(self, index: int, output: np.ndarray, sample: np.ndarray, state: SamplerState) -> StepResult:
        sigma, sigma_next = self.sigmas[index], self.sigmas[index + 1]
        # 1. predicted clean latent x0
        denoised = predict_x0_k(self.config.prediction_type, output, sample, sigma)
        # 2. split the step: deterministic part down to sigma_down, noise of size sigma_up
        sigma_up = (sigma_next**2 * (sigma**2 - sigma_next**2) / sigma**2) ** np.float32(0.5)
        sigma_down = (sigma_next**2 - sigma_up**2) ** np.float32(0.5)
        # 3. Euler step with the ODE derivative
        derivative = (sample - denoised) / sigma
        moved = sample + derivative * (sigma_down - sigma)
        # 4. add fresh noise
        noise = state.noise.normal(sample.shape)
        return StepResult((moved + noise * sigma_up).astype(np.float32), denoised)
