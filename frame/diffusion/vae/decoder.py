"""VAE decoding, whole or in overlapping tiles blended with linear ramps.

The decoder's activations grow with the image (a 64×64 latent → 512×512 image needs about 2.5 GB in
onnxruntime), so latents larger than one tile are decoded tile by tile: tiles stepping by ``tile - overlap``,
the last tile flush with the edge. Each
decoded tile is weighted by linear ramps across every edge it shares with a neighbour (both axes,
all four sides, unlike OnnxStream's top/left-only ramps) and the weighted sum is normalised, so seams
fade over ``overlap`` latent pixels (64 image pixels). Which tiles: ``frame.diffusion.vae.tiles.choose``
(the fewest that fit the worker's memory, unless ``model.vae_tile`` says), the rule the estimate
counts with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from frame.diffusion.vae import tiles
from frame.diffusion.vae.tiles import TileLayout
from frame.engine.memory import with_model
from frame.errors import FrameError, UsageError

log = logging.getLogger(__name__)


def edge_weights(start: int, length: int, previous_end: int | None, next_start: int | None,
                 factor: int) -> np.ndarray:
    """1-D pixel weights of one tile: ramps up across the overlap with the previous tile, down across
    the overlap with the next; 1 elsewhere. Ramp values (i + 0.5) / n never reach 0."""
    weights = np.ones(length * factor, dtype=np.float32)
    if previous_end is not None and previous_end > start:
        n = (previous_end - start) * factor
        weights[:n] = (np.arange(n, dtype=np.float32) + 0.5) / n
    if next_start is not None and next_start < start + length:
        n = (start + length - next_start) * factor
        weights[-n:] *= ((np.arange(n, dtype=np.float32) + 0.5) / n)[::-1]
    return weights


def _latent_spec(model: Any) -> Any:
    spec = next((i for i in model.inputs if i.name == "latent_sample"), None)
    if spec is None:
        raise FrameError("vae_decoder: the ONNX model has no 'latent_sample' input "
                         f"(inputs: {', '.join(i.name for i in model.inputs)})")
    return spec


def static_latent_size(model: Any) -> tuple[int, int] | None:
    """The decoder's fixed (height, width) in latent pixels, or None for dynamic axes."""
    shape = _latent_spec(model).shape
    if shape and len(shape) == 4 and isinstance(shape[2], int) and isinstance(shape[3], int):
        return shape[2], shape[3]
    return None


def _run(model: Any, latents: np.ndarray) -> np.ndarray:
    out = model.run({"latent_sample": latents.astype(_latent_spec(model).dtype)})
    if "sample" not in out:
        raise FrameError(f"vae_decoder: the ONNX model has no 'sample' output (outputs: {', '.join(out)})")
    return out["sample"].astype(np.float32)


def decode_tiled(model: Any, latents: np.ndarray, tile: tuple[int, int] | TileLayout, overlap: int = 8,
                 progress: Callable[[float], None] | None = None) -> np.ndarray:
    """Decode (1, 4, h, w) latents tile by tile (a ``TileLayout``, or tiles of ``tile`` overlapping by
    ``overlap``); returns the blended (1, 3, H, W) float image."""
    _, _, height, width = latents.shape
    layout = tile if isinstance(tile, TileLayout) else tiles.fixed_layout((height, width), tile, overlap)
    ys, xs = layout.ys, layout.xs
    th, tw = layout.tile
    total, done = layout.count, 0
    image = weight_sum = None
    factor = 0
    for iy, y in enumerate(ys):
        for ix, x in enumerate(xs):
            decoded = _run(model, np.ascontiguousarray(latents[:, :, y:y + th, x:x + tw]))
            if image is None:
                factor = decoded.shape[2] // th
                image = np.zeros((1, decoded.shape[1], height * factor, width * factor), dtype=np.float32)
                weight_sum = np.zeros((height * factor, width * factor), dtype=np.float32)
            wy = edge_weights(y, th, ys[iy - 1] + th if iy else None, ys[iy + 1] if iy + 1 < len(ys) else None,
                              factor)
            wx = edge_weights(x, tw, xs[ix - 1] + tw if ix else None, xs[ix + 1] if ix + 1 < len(xs) else None,
                              factor)
            weight = wy[:, None] * wx[None, :]
            rows, cols = slice(y * factor, (y + th) * factor), slice(x * factor, (x + tw) * factor)
            image[:, :, rows, cols] += decoded * weight
            weight_sum[rows, cols] += weight
            del decoded
            done += 1
            if progress is not None:
                progress(done / total)
    assert image is not None and weight_sum is not None
    return image / weight_sum


def to_pixels(image: np.ndarray) -> np.ndarray:
    """(1, 3, H, W) decoder output in [-1, 1] → (H, W, 3) uint8, rounded like diffusers' postprocessing."""
    scaled = np.clip(image[0] / 2 + 0.5, 0.0, 1.0)
    return (scaled.transpose(1, 2, 0) * 255).round().astype(np.uint8)


def decode(load: Callable[[str], Any], source: str, latents: np.ndarray, scaling_factor: float,
           tile: int | None = None, overlap: int = 8, tiled: bool | None = None,
           progress: Callable[[float], None] | None = None, relax_static: bool = False,
           peak_mb: tiles.PeakMb | None = None, limit_mb: float | None = None) -> np.ndarray:
    """Latents from the sampler → (H, W, 3) uint8 pixels.

    ``tile`` (``model.vae_tile``; None: the fewest tiles whose ``peak_mb`` fits ``limit_mb``, see
    ``tiles.layout_for``). ``tiled=None`` tiles when the latent is larger than that; ``False`` decodes whole;
    ``True`` tiles even a latent that would fit. ``relax_static``: the decoder declares a fixed input
    size that none of its ops depends on (``shapes.check_vae``), so it is run like a dynamic one.
    """
    if tile is not None and not 0 <= overlap < tile:
        raise UsageError(f"VAE tile overlap must be at least 0 and smaller than the tile ({tile}), got {overlap}")
    if overlap < 0:
        raise UsageError(f"VAE tile overlap must be at least 0, got {overlap}")
    scaled = (latents / np.float32(scaling_factor)).astype(np.float32)

    def run(model: Any) -> np.ndarray:
        static = static_latent_size(model)
        if static and relax_static and hasattr(model, "override_input_shape"):
            model.override_input_shape("latent_sample", (*_latent_spec(model).shape[:2], None, None))
            static = None
        _, _, height, width = scaled.shape
        layout = tiles.layout_for((height, width), static, tile, overlap, tiled, peak_mb, limit_mb)
        if layout.count > 1 or layout.tile != (height, width):
            log.info("decoding %dx%d latent in %s", height, width, layout.describe())
            image = decode_tiled(model, scaled, layout, progress=progress)
        else:
            image = _run(model, scaled)
            if progress is not None:
                progress(1.0)
        return to_pixels(image)

    return with_model(load, source, run)
