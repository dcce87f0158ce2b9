"""DPM-Solver++(2M) (Lu et al. 2022, Algorithm 2, midpoint form), mirroring diffusers'
DPMSolverMultistepScheduler with ``algorithm_type="dpmsolver++"``, ``solver_order=2``.

A multistep method: each step reuses the previous step's clean-latent estimate, kept in
``state.history["previous_x0"]`` so that a resumed render continues exactly. The first step and the last
step (to sigma = 0) are first order, as in diffusers (``lower_order_final``, ``final_sigmas_type="zero"``).
The ``karras`` variant spaces the noise levels as Karras et al. (2022) and rounds the timesteps.
"""

from __future__ import annotations

import numpy as np

from frame.diffusion.samplers.base import Sampler, SamplerState, StepResult
from frame.diffusion.samplers.parameterisation import predict_x0
from frame.diffusion.samplers.registry import register_sampler
from frame.diffusion.samplers.schedule import (
    LINEAR_BETAS,
    SchedulerConfig,
    alphas_cumprod,
    dpm_timesteps,
    interp_sigmas,
    karras_sigmas,
    sigma_to_t,
    train_sigmas,
)

ONE = np.float32(1)
HALF = np.float32(0.5)


def _alpha_sigma_lambda(k_sigma: np.float32) -> tuple[np.float32, np.float32, np.float32]:
    """VP coefficients and half log-SNR lambda = log(alpha / sigma); lambda is +inf at sigma = 0."""
    alpha = ONE / (k_sigma**2 + ONE) ** HALF
    sigma = k_sigma * alpha
    with np.errstate(divide="ignore"):
        lam = np.log(alpha) - np.log(sigma)
    return alpha, sigma, lam


@register_sampler("dpm++2m", a1111="DPM++ 2M", aliases=("dpmpp_2m", "dpm++_2m"),
                  class_defaults={**LINEAR_BETAS, "timestep_spacing": "linspace"})
@register_sampler("dpm++2m_karras", a1111="DPM++ 2M Karras",
                  aliases=("dpmpp_2m_karras", "dpm++_2m_karras", "dpm++2m_k"),
                  class_defaults={**LINEAR_BETAS, "timestep_spacing": "linspace"}, karras=True)
class DPMSolver2M(Sampler):
    """Deterministic second-order multistep solver; ``karras=True`` gives "dpm++2m_karras"."""

    def __init__(self, config: SchedulerConfig, steps: int, karras: bool = False) -> None:
        self.config = config
        self.name = "dpm++2m_karras" if karras else "dpm++2m"
        table = train_sigmas(alphas_cumprod(config))
        timesteps = dpm_timesteps(config, steps)
        if karras:
            sigmas = karras_sigmas(float(table[0]), float(table[-1]), steps)
            timesteps = sigma_to_t(sigmas, np.log(table.astype(np.float64)))
            if config.beta_schedule != "squaredcos_cap_v2":
                timesteps = timesteps.round()
        else:
            sigmas = interp_sigmas(timesteps, table)
        self.timesteps = timesteps.astype(np.int64)
        self.sigmas = np.append(sigmas, 0.0).astype(np.float32)
        self.init_noise_sigma = 1.0

    def add_noise(self, original: np.ndarray, noise: np.ndarray, index: int) -> np.ndarray:
        """Variance preserving at the step's noise level: ``alpha * x0 + sigma * noise``."""
        alpha, sigma, _ = _alpha_sigma_lambda(self.sigmas[index])
        return (alpha * original + sigma * noise).astype(np.float32)

    def step(self, index: int, output: np.ndarray, sample: np.ndarray, state: SamplerState) -> StepResult:
        alpha_s, sigma_s, lambda_s = _alpha_sigma_lambda(self.sigmas[index])
        alpha_t, sigma_t, lambda_t = _alpha_sigma_lambda(self.sigmas[index + 1])
        # 1. data prediction x0 at the current noise level
        x0 = predict_x0(self.config.prediction_type, output, sample, alpha_s, sigma_s)
        previous = state.history.get("previous_x0")
        last = index == self.steps - 1
        h = lambda_t - lambda_s
        with np.errstate(over="ignore"):
            decay = np.exp(-h) - ONE  # -1 when stepping to sigma = 0
        if previous is None or last:
            # 2a. first-order update (DPM-Solver++ 1 = DDIM in lambda)
            moved = (sigma_t / sigma_s) * sample - (alpha_t * decay) * x0
        else:
            # 2b. second-order midpoint update with the previous estimate
            _, _, lambda_prev = _alpha_sigma_lambda(self.sigmas[index - 1])
            ratio = (lambda_s - lambda_prev) / h
            d1 = (ONE / ratio) * (x0 - previous)
            moved = (sigma_t / sigma_s) * sample - (alpha_t * decay) * x0 - HALF * (alpha_t * decay) * d1
        state.history["previous_x0"] = x0.astype(np.float32)
        return StepResult(moved.astype(np.float32), x0)
