"""What the UNet predicts, and how to turn it into a clean-image estimate.

The second of the three sampler ideas. A noisy latent is ``x = alpha * x0 + sigma * eps`` (variance
preserving form, ``alpha**2 + sigma**2 = 1``). Models predict ``eps`` (SD 1.5, SDXL), ``v = alpha * eps -
sigma * x0`` (SD 2.x 768, some Turbo/LCM models) or ``x0`` itself ("sample"). The Euler samplers work with
the variance-exploding latent ``x / alpha`` and noise level ``s = sigma / alpha``;
:func:`vp_coefficients` converts between the two.
"""

from __future__ import annotations

import numpy as np

from frame.errors import FrameError

PREDICTIONS = ("epsilon", "v_prediction", "sample")


def vp_coefficients(k_sigma: float) -> tuple[float, float]:
    """(alpha, sigma) of the variance-preserving form for a k-diffusion noise level (diffusers
    ``_sigma_to_alpha_sigma_t``)."""
    alpha = 1.0 / (k_sigma**2 + 1.0) ** 0.5
    return alpha, k_sigma * alpha


def predict_x0(prediction: str, output: np.ndarray, sample: np.ndarray, alpha: float, sigma: float) -> np.ndarray:
    """Clean-latent estimate from a model output at a VP noise level (alpha, sigma)."""
    if prediction == "epsilon":
        return (sample - sigma * output) / alpha
    if prediction == "v_prediction":
        return alpha * sample - sigma * output
    if prediction == "sample":
        return output
    raise FrameError(f"unknown prediction_type {prediction!r} (expected one of {', '.join(PREDICTIONS)})")


def predict_eps(prediction: str, output: np.ndarray, sample: np.ndarray, alpha: float, sigma: float) -> np.ndarray:
    """Noise estimate from a model output at a VP noise level (alpha, sigma)."""
    if prediction == "epsilon":
        return output
    if prediction == "v_prediction":
        return alpha * output + sigma * sample
    if prediction == "sample":
        return (sample - alpha * output) / sigma
    raise FrameError(f"unknown prediction_type {prediction!r} (expected one of {', '.join(PREDICTIONS)})")


def predict_x0_k(prediction: str, output: np.ndarray, sample: np.ndarray, k_sigma: float) -> np.ndarray:
    """Clean-latent estimate for a variance-exploding latent at k-diffusion noise level ``k_sigma``.

    Written in the denoiser form ``c_skip * x + c_out * output`` (Karras et al. 2022) so that it matches
    diffusers' Euler schedulers to float32 rounding.
    """
    if prediction == "epsilon":
        return sample - k_sigma * output
    if prediction == "v_prediction":
        return output * (-k_sigma / (k_sigma**2 + 1) ** 0.5) + sample / (k_sigma**2 + 1)
    if prediction == "sample":
        return output
    raise FrameError(f"unknown prediction_type {prediction!r} (expected one of {', '.join(PREDICTIONS)})")
