"""Noise schedules: the training betas, and which timesteps/sigmas a sampler visits.

This is the first of the three ideas kept apart in ``frame.diffusion.samplers`` (schedule,
parameterisation, sampler loop). Everything here follows diffusers' schedulers so that frame and
diffusers visit the same timesteps for the same ``scheduler_config.json``; each function names the
diffusers code it mirrors. All arrays are computed with numpy in float32 where diffusers uses float32.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frame.errors import FrameError

# The linear beta schedule of the classic diffusers schedulers, for keys a scheduler_config.json leaves out.
LINEAR_BETAS = {"beta_start": 0.0001, "beta_end": 0.02, "beta_schedule": "linear", "steps_offset": 0}


@dataclass(frozen=True)
class SchedulerConfig:
    """The ``scheduler_config.json`` keys frame understands, with diffusers' EulerDiscreteScheduler defaults.

    Each sampler overlays the defaults of its own diffusers class (its ``class_defaults`` in the
    registry) before the file's values, exactly like ``SomeScheduler.from_config(config)`` does for keys the file omits.
    """

    num_train_timesteps: int = 1000
    beta_start: float = 0.0001
    beta_end: float = 0.02
    beta_schedule: str = "linear"
    trained_betas: tuple[float, ...] | None = None
    prediction_type: str = "epsilon"
    timestep_spacing: str = "linspace"
    steps_offset: int = 0
    rescale_betas_zero_snr: bool = False
    set_alpha_to_one: bool = True
    clip_sample: bool = False
    clip_sample_range: float = 1.0
    use_karras_sigmas: bool = False
    original_inference_steps: int = 50
    timestep_scaling: float = 10.0
    class_name: str = ""
    extras: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any], defaults: dict[str, Any] | None = None) -> SchedulerConfig:
        """Overlay ``defaults`` (a diffusers class's defaults) and then the file's keys."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extras", "class_name"}
        merged = dict(defaults or {})
        merged.update({k: v for k, v in data.items() if not k.startswith("_")})
        known = {k: v for k, v in merged.items() if k in names}
        if known.get("trained_betas") is not None:
            known["trained_betas"] = tuple(float(b) for b in known["trained_betas"])
        extras = {k: v for k, v in merged.items() if k not in names}
        return cls(**known, class_name=str(data.get("_class_name", "")), extras=extras)

    def check(self) -> None:
        """Reject settings frame does not implement, naming the key, instead of sampling wrongly."""
        if self.beta_schedule not in ("linear", "scaled_linear", "squaredcos_cap_v2") and not self.trained_betas:
            raise FrameError(f"scheduler_config.json: beta_schedule {self.beta_schedule!r} is not supported")
        if self.prediction_type not in ("epsilon", "v_prediction", "sample"):
            raise FrameError(f"scheduler_config.json: prediction_type {self.prediction_type!r} is not supported")
        if self.timestep_spacing not in ("linspace", "leading", "trailing"):
            raise FrameError(f"scheduler_config.json: timestep_spacing {self.timestep_spacing!r} is not supported")
        for key, allowed in (("interpolation_type", "linear"), ("timestep_type", "discrete"),
                             ("final_sigmas_type", "zero"), ("thresholding", False)):
            value = self.extras.get(key, allowed)
            if value != allowed:
                raise FrameError(f"scheduler_config.json: {key}={value!r} is not supported (only {allowed!r})")


def torch_linspace32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(..., dtype=float32)`` bit for bit: the first half counts up from ``start``,
    the second half down from ``end``."""
    start32, end32 = np.float32(start), np.float32(end)
    step = (end32 - start32) / np.float32(steps - 1)
    index = np.arange(steps, dtype=np.float32)
    half = steps // 2
    out = np.where(np.arange(steps) < half, start32 + step * index, end32 - step * (np.float32(steps - 1) - index))
    return out.astype(np.float32)


def _cosine_betas(count: int, max_beta: float = 0.999) -> np.ndarray:
    """Glide's cosine schedule (diffusers ``betas_for_alpha_bar``, cosine transform)."""

    def alpha_bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    betas = [min(1 - alpha_bar((i + 1) / count) / alpha_bar(i / count), max_beta) for i in range(count)]
    return np.array(betas, dtype=np.float32)


def _rescale_zero_terminal_snr(betas: np.ndarray) -> np.ndarray:
    """Shift/scale sqrt(alphas_cumprod) so the last timestep has zero SNR (arXiv 2305.08891, Algorithm 1)."""
    root = np.sqrt(np.cumprod(1.0 - betas, dtype=np.float32))
    first, last = root[0].copy(), root[-1].copy()
    root = (root - last) * (first / (first - last))
    alphas_bar = root**2
    alphas = np.concatenate([alphas_bar[:1], alphas_bar[1:] / alphas_bar[:-1]])
    return (1 - alphas).astype(np.float32)


def alphas_cumprod(config: SchedulerConfig, finite_terminal_sigma: bool = True) -> np.ndarray:
    """Cumulative product of (1 - beta) over the training timesteps, float32 like diffusers.

    With ``rescale_betas_zero_snr`` the last value is 0; the sigma-based schedulers (Euler, DPM-Solver)
    replace it by 2**-24 so the first sigma is finite, DDIM and LCM keep the 0
    (``finite_terminal_sigma=False``).
    """
    n = config.num_train_timesteps
    if config.trained_betas:
        betas = np.asarray(config.trained_betas, dtype=np.float32)
    elif config.beta_schedule == "linear":
        betas = torch_linspace32(config.beta_start, config.beta_end, n)
    elif config.beta_schedule == "scaled_linear":
        betas = torch_linspace32(config.beta_start**0.5, config.beta_end**0.5, n) ** 2
    else:
        betas = _cosine_betas(n)
    if config.rescale_betas_zero_snr:
        betas = _rescale_zero_terminal_snr(betas)
    # torch accumulates float32 cumulative products in float64
    cumulative = np.cumprod((np.float32(1.0) - betas).astype(np.float64)).astype(np.float32)
    if config.rescale_betas_zero_snr and finite_terminal_sigma:
        cumulative[-1] = 2.0**-24
    return cumulative


def train_sigmas(cumulative: np.ndarray) -> np.ndarray:
    """k-diffusion noise levels sigma(t) = sqrt((1 - alpha_bar) / alpha_bar), float32."""
    return (((1 - cumulative) / cumulative) ** 0.5).astype(np.float32)


def spaced_timesteps(config: SchedulerConfig, steps: int, style: str) -> np.ndarray:
    """Timesteps visited for ``steps`` steps, per diffusers' ``set_timesteps`` of the given ``style``.

    ``style`` "k" (Euler schedulers: float timesteps, ``steps`` values) or "ddim" (int64 timesteps).
    The DPM-Solver variant (``steps + 1`` points, last dropped) is :func:`dpm_timesteps`.
    """
    n, spacing = config.num_train_timesteps, config.timestep_spacing
    dtype = np.float32 if style == "k" else np.int64
    if spacing == "linspace":
        values = np.linspace(0, n - 1, steps, dtype=np.float32 if style == "k" else np.float64)[::-1]
        return (values if style == "k" else values.round()).astype(dtype)
    if spacing == "leading":
        ratio = n // steps
        return (np.arange(0, steps) * ratio).round()[::-1].astype(dtype) + config.steps_offset
    ratio = n / steps
    return np.arange(n, 0, -ratio).round().astype(dtype) - 1


def dpm_timesteps(config: SchedulerConfig, steps: int) -> np.ndarray:
    """DPMSolverMultistepScheduler.set_timesteps: ``steps + 1`` spaced points with the last one dropped."""
    n, spacing = config.num_train_timesteps, config.timestep_spacing
    if spacing == "linspace":
        return np.linspace(0, n - 1, steps + 1).round()[::-1][:-1].astype(np.int64)
    if spacing == "leading":
        ratio = n // (steps + 1)
        return (np.arange(0, steps + 1) * ratio).round()[::-1][:-1].astype(np.int64) + config.steps_offset
    return np.arange(n, 0, -n / steps).round().astype(np.int64) - 1


def lcm_timesteps(config: SchedulerConfig, steps: int) -> np.ndarray:
    """LCMScheduler.set_timesteps: ``steps`` evenly chosen from the distillation schedule."""
    original = config.original_inference_steps
    if not 1 <= steps <= original:
        raise FrameError(f"lcm: steps must be between 1 and original_inference_steps={original}, got {steps}")
    k = config.num_train_timesteps // original
    origin = (np.arange(1, original + 1) * k - 1)[::-1]
    indices = np.floor(np.linspace(0, len(origin), num=steps, endpoint=False)).astype(np.int64)
    return origin[indices].astype(np.int64)


def interp_sigmas(timesteps: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    """Noise level at (possibly fractional) timesteps by linear interpolation, as diffusers does."""
    return np.interp(timesteps.astype(np.float64), np.arange(len(sigmas)), sigmas.astype(np.float64))


def karras_sigmas(sigma_min: float, sigma_max: float, steps: int, rho: float = 7.0) -> np.ndarray:
    """Karras et al. (2022, eq. 5) noise levels: uniform in sigma^(1/rho)."""
    ramp = np.linspace(0, 1, steps)
    lo, hi = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return (hi + ramp * (lo - hi)) ** rho


def sigma_to_t(sigma: np.ndarray, log_sigmas: np.ndarray) -> np.ndarray:
    """Fractional timestep whose training sigma equals ``sigma`` (interpolation in log sigma)."""
    sigma = np.atleast_1d(np.asarray(sigma, dtype=np.float64))
    log_sigma = np.log(np.maximum(sigma, 1e-10))
    dists = log_sigma - log_sigmas[:, None]
    low = np.cumsum(dists >= 0, axis=0).argmax(axis=0).clip(max=len(log_sigmas) - 2)
    high = low + 1
    w = np.clip((log_sigmas[low] - log_sigma) / (log_sigmas[low] - log_sigmas[high]), 0, 1)
    return (1 - w) * low + w * high
