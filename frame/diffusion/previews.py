"""Per-step previews for the status page: TAESD's decode of the current latent when a tiny VAE is
configured (``model.vae_decoder``), else the fixed latent→RGB projection (``progress.latent_preview``).

The tiny decoder sees the clean-latent estimate (``Progress.denoised``, else the latents) pooled to at
most ``PREVIEW_LATENT`` latent pixels a side, so a preview is a 256-pixel picture whatever the night's
size and costs a quarter of a 512² decode: counted at the Pi's constants about 6 s, under 2 % of an SD
1.5 or SDXL step there (``benchmarks/tiny_vae_preview.py``, docs/estimate.md). The decoder stays loaded
between steps (1.3 MB of uint8 weights); ``close`` releases it when the render ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from frame.diffusion.progress import Progress
from frame.diffusion.vae.tiny import TinyVae
from frame.engine.memory import release_model

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline
    from frame.engine.runnable import Runnable

log = logging.getLogger(__name__)

PREVIEW_LATENT = 32  # latent pixels a side at most: 256x256 pixels
Previewer = Callable[[Progress], "Image.Image | None"]


def pooled(latents: np.ndarray, most: int = PREVIEW_LATENT) -> np.ndarray:
    """(1, C, h, w) → block means by the smallest whole factor that brings both sides to ``most`` or less."""
    h, w = latents.shape[2:]
    k = max(1, -(-max(h, w) // most))
    if k == 1:
        return latents.astype(np.float32)
    hh, ww = h // k * k, w // k * k  # a ragged edge (under k pixels) is left out of the preview
    x = latents[:, :, :hh, :ww].astype(np.float32)
    return x.reshape(x.shape[0], x.shape[1], hh // k, k, ww // k, k).mean(axis=(3, 5))


class TinyPreviewer:
    """``Progress`` → TAESD's decode of its latent (None outside finished steps)."""

    def __init__(self, load: Callable[[str], Runnable], tiny: TinyVae) -> None:
        self._load, self.tiny = load, tiny
        self._model: Runnable | None = None
        self._failed = False

    def decode(self, latents: np.ndarray) -> Image.Image:
        if self._model is None:
            self._model = self._load(self.tiny.decoder)
        x = (pooled(latents) / np.float32(self.tiny.scaling_factor)).astype(np.float32)
        sample = self._model.run({"latent_sample": x})["sample"][0]
        pixels = np.clip((sample.transpose(1, 2, 0) + 1.0) * 127.5, 0, 255).round().astype(np.uint8)
        return Image.fromarray(pixels, "RGB")

    def __call__(self, report: Progress) -> Image.Image | None:
        source = report.denoised if report.denoised is not None else report.latents
        if source is None:
            return None
        if self._failed:
            return report.preview(scale=2)
        try:
            return self.decode(source)
        except Exception as exc:  # noqa: BLE001 - a preview must never cost the night
            log.warning("tiny VAE preview failed (%s): the fixed projection from now on", exc)
            self._failed = True
            self.close()
            return report.preview(scale=2)

    def close(self) -> None:
        if self._model is not None:
            release_model(self._model)
            self._model = None


def projection_preview(report: Progress) -> Image.Image | None:
    """The fixed latent→RGB projection at twice the latent size (no VAE run)."""
    return report.preview(scale=2)


def previewer_for(pipe: Pipeline, enabled: bool) -> Previewer | None:
    """The night's previewer: None when ``render.previews`` is off, TAESD with a tiny VAE, else the projection."""
    if not enabled:
        return None
    tiny = pipe.tiny_vae
    return TinyPreviewer(pipe.load, tiny) if tiny is not None else projection_preview
