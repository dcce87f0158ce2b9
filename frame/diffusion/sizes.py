"""Generation sizes: which sizes an export allows, and picking one for a panel's aspect ratio.

A latent side must be a multiple of the UNet's total down-sampling (8 latent pixels = 64 image pixels
for SD 1.5 and SDXL) because the exported graph concatenates skip connections of matching sizes. An
export with static spatial axes allows exactly one size.
"""

from __future__ import annotations

import math
import re

from frame.diffusion.model_info import ModelInfo
from frame.errors import UsageError

_SIZE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


def parse_size(text: str) -> tuple[int, int] | None:
    """``"WxH"`` → (width, height); ``"auto"`` → None."""
    if text.strip().lower() == "auto":
        return None
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"size {text!r} is not WIDTHxHEIGHT (e.g. 512x512) or 'auto'")
    return int(match.group(1)), int(match.group(2))


def pixel_step(info: ModelInfo) -> int:
    return info.vae_factor * info.latent_multiple


def check_size(width: int, height: int, info: ModelInfo, static_latent: tuple[int, int] | None = None
               ) -> tuple[int, int]:
    """Latent (height, width) for an image size, or a UsageError saying which sizes are allowed."""
    step = pixel_step(info)
    if static_latent is not None:
        allowed = (static_latent[1] * info.vae_factor, static_latent[0] * info.vae_factor)
        if (width, height) != allowed:
            raise UsageError(f"size {width}x{height} is not allowed: this {info.label} export has fixed axes "
                             f"and only renders {allowed[0]}x{allowed[1]}")
    if width <= 0 or height <= 0 or width % step or height % step:
        raise UsageError(f"size {width}x{height} is not allowed: width and height must be positive multiples "
                         f"of {step} pixels for this {info.label} model "
                         f"(e.g. {_nearest(width, step)}x{_nearest(height, step)})")
    return height // info.vae_factor, width // info.vae_factor


def _nearest(value: int, step: int) -> int:
    return max(step, int(round(value / step)) * step)


def auto_size(info: ModelInfo, aspect: float, static_latent: tuple[int, int] | None = None) -> tuple[int, int]:
    """(width, height) near the model's native pixel area whose ratio is closest to ``aspect`` (w / h).

    Scores each allowed height by aspect error plus half the area error (both in log space), so a
    wide panel gets a wide image of about the pixel count the model was trained on.
    """
    if static_latent is not None:
        return static_latent[1] * info.vae_factor, static_latent[0] * info.vae_factor
    if not aspect > 0:
        raise UsageError(f"aspect ratio must be positive, got {aspect}")
    step = pixel_step(info)
    native_w, native_h = info.native_size
    area = native_w * native_h
    best: tuple[float, int, int] | None = None
    for height in range(step, 4 * max(native_w, native_h) + step, step):
        width = _nearest(height * aspect, step)
        score = abs(math.log(width / height / aspect)) + 0.5 * abs(math.log(width * height / area))
        if best is None or score < best[0]:
            best = (score, width, height)
    assert best is not None
    return best[1], best[2]


def night_size(config, pipe) -> tuple[int, int]:  # noqa: ANN001 (Config, Pipeline: no import cycle)
    """The size a night renders at: ``model.size``, or for "auto" the model's native area at the
    panel's aspect ratio (rotation included). One definition for the worker, the night's rule checks
    and the estimate, so they never disagree about tonight's picture."""
    size = parse_size(config.model.size)
    if size:
        return size
    width, height = parse_size(config.display.size) or (1, 1)
    if config.display.rotate in (90, 270):
        width, height = height, width
    return pipe.auto_size(width / height)
