"""Progress reports for long renders: per UNet op and per step, with an ETA and a cheap preview.

On a Pi Zero a render takes an hour, so the owner wants to see it move: the pipeline calls the
``callback`` after every op of every UNet run (``step_done=False``) and once per finished step
(``step_done=True``, with the latents). :meth:`Progress.preview` turns the current clean-latent
estimate into a small RGB image with a fixed linear latent→RGB projection (no VAE run).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:
    from frame.engine.runnable import Runnable

# Linear latent→RGB projections (rows: latent channels; columns: R, G, B) fitted by the community for
# live previews (ComfyUI's ``latent_formats.py``: SD15 and SDXL ``latent_rgb_factors`` / bias).
LATENT_RGB = {
    "sd15": (np.array([[0.3512, 0.2297, 0.3227],
                       [0.3250, 0.4974, 0.2350],
                       [-0.2829, 0.1762, 0.2721],
                       [-0.2120, -0.2616, -0.7177]], dtype=np.float32), np.zeros(3, dtype=np.float32)),
    "sdxl": (np.array([[0.3651, 0.4232, 0.4341],
                       [-0.2533, -0.0042, 0.1068],
                       [0.1076, 0.1111, -0.0362],
                       [-0.3165, -0.2492, -0.2188]], dtype=np.float32),
             np.array([0.1084, -0.0175, -0.0011], dtype=np.float32)),
}


def latent_preview(latents: np.ndarray, kind: str, scale: int = 1) -> Image.Image:
    """RGB image (latent size × ``scale``) from a (1, 4, h, w) latent via the fixed projection."""
    factors, bias = LATENT_RGB[kind]
    rgb = np.einsum("chw,cr->hwr", latents[0].astype(np.float32), factors) + bias
    pixels = np.clip((rgb + 1.0) * 127.5, 0, 255).round().astype(np.uint8)
    image = Image.fromarray(pixels, "RGB")
    if scale > 1:
        image = image.resize((image.width * scale, image.height * scale), Image.NEAREST)
    return image


@dataclass(frozen=True)
class Progress:
    """One progress report. ``fraction`` and ``eta_seconds`` cover the denoising loop.

    ``phase`` is "text", "unet" or "vae"; ``step`` counts finished steps (0-based index of the step in
    progress while ``step_done`` is False); ``op_fraction`` is the share of the current model run done.
    ``bytes_per_step`` is what the UNet's weights provider fetched during the last finished step (all
    sources), ``cache_bytes_per_step`` the part of them read from the local weight cache
    (``model.cache``), ``link_rate`` the bytes per second HTTP delivered so far (None without HTTP reads).
    """

    phase: str
    step: int
    steps: int
    op_fraction: float
    fraction: float
    eta_seconds: float | None
    step_done: bool = False
    latents: np.ndarray | None = None
    denoised: np.ndarray | None = None
    kind: str = "sd15"
    bytes_per_step: int | None = None
    link_rate: float | None = None
    cache_bytes_per_step: int | None = None

    def preview(self, scale: int = 1) -> Image.Image | None:
        """Low-resolution RGB guess of the final picture (None outside finished steps)."""
        source = self.denoised if self.denoised is not None else self.latents
        return None if source is None else latent_preview(source, self.kind, scale)


class EtaClock:
    """Estimates time left from the share of the denoising work done since (re)start."""

    def __init__(self, first_step: int, steps: int) -> None:
        self.first_step = first_step
        self.steps = steps
        self.started = time.monotonic()

    def fraction(self, step: int, op_fraction: float) -> float:
        return min(1.0, (step + op_fraction) / self.steps) if self.steps else 1.0

    def eta(self, step: int, op_fraction: float) -> float | None:
        work = self.steps - self.first_step
        done = (step - self.first_step + op_fraction) / work if work else 1.0
        if done <= 0:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / done * (1.0 - done)


class FetchMeter:
    """Bytes a model's provider fetched per denoising step, and the HTTP link's rate, for progress.

    Works from ``Runnable.fetch_stats`` snapshots; a model that does not count them (onnxruntime's)
    reports None.
    """

    def __init__(self, model: Runnable) -> None:
        self.model = model
        self.started = model.fetch_stats
        self.step_start = self.started
        self.last_step_bytes: int | None = None
        self.last_step_cache_bytes: int | None = None

    def step_done(self) -> None:
        now = self.model.fetch_stats
        if now is None or self.step_start is None:
            return
        step = now - self.step_start
        self.last_step_bytes = step.total_bytes
        self.last_step_cache_bytes = step.bytes.get("cache", 0)
        self.step_start = now

    def link_rate(self) -> float | None:
        now = self.model.fetch_stats
        if now is None or self.started is None:
            return None
        return (now - self.started).rate("http")


ProgressCallback = Callable[[Progress], None]


class StepReports:
    """The denoising loop's progress callbacks: per op (throttled by the receiver) and per finished
    step, with the ETA and the bytes fetched per step (``denoise_run.denoise_settings`` hands ``op`` and
    ``step`` to ``denoise.run_loop``)."""

    def __init__(self, callback: ProgressCallback | None, steps: int, start: int, first: int, kind: str,
                 meter: FetchMeter) -> None:
        """``first``: the first step that runs at all (image-to-image skips the ones before it), so
        progress counts the steps that run (12 of 12 for 20 steps at strength 0.6)."""
        self.callback, self.total, self.first, self.kind, self.meter = callback, steps - first, first, kind, meter
        self.clock = EtaClock(start - first, steps - first)

    def _report(self, step: int, fraction: float, done: bool, latents=None, denoised=None) -> None:
        if self.callback is not None:
            shown = step - self.first
            self.callback(Progress("unet", shown, self.total, fraction, self.clock.fraction(shown, fraction),
                                   self.clock.eta(shown, fraction), done, latents, denoised, self.kind,
                                   self.meter.last_step_bytes, self.meter.link_rate(),
                                   self.meter.last_step_cache_bytes))

    def op(self, index: int, fraction: float) -> None:
        self._report(index, fraction, False)

    def step(self, done: int, latents: np.ndarray, denoised: np.ndarray) -> None:
        self.meter.step_done()
        self._report(done, 0.0, True, latents, denoised)
