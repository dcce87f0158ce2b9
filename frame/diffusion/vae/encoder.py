"""VAE encoding for image-to-image: pixels → the scaled latent a render starts from, whole or in tiles.

``vae_encoder/model.onnx`` (input ``sample``, pixels in [-1, 1]) comes in three styles; all give the
latent diffusers' img2img pipelines take, ``scaling_factor * latent_dist.sample(generator)``
(``retrieve_latents``), with the posterior noise ``eps`` chosen by frame:

* ``latent_parameters`` (optimum ≥ 1.23): mean and log-variance stacked (8 channels). frame samples
  ``mean + exp(0.5 * clip(logvar, -30, 20)) * eps``, as ``DiagonalGaussianDistribution.sample``.
* ``latent_sample`` drawn inside the graph (optimum < 1.23, diffusers' conversion script: a
  RandomNormalLike node): the engine's random op is handed ``eps`` (``Model.run(rng=...)``), so the
  graph computes the same ``mean + std * eps``.
* ``latent_sample`` without a random op: the export already chose the mean; used as it is (what
  optimum's ORT pipeline does with it).

Activations grow with the picture like the decoder's (see ``docs/benchmarks-diffusion.md``), so a
picture larger than one tile is encoded in overlapping tiles of ``tile`` latent pixels (``tile * 8``
image pixels), blended in latent space with the decoder's linear ramps. The noise is one draw for
the whole latent, sliced per tile, so overlapping tiles agree on it. Tiles are not exact: the
encoder's GroupNorm and its mid-block attention then see one tile, not the whole picture (as in
diffusers' ``tiled_encode``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from frame.diffusion.vae.decoder import edge_weights
from frame.diffusion.vae.tiles import tile_plan, tile_starts
from frame.engine.memory import with_model
from frame.errors import FrameError, UsageError

if TYPE_CHECKING:
    from frame.engine.runnable import Runnable

log = logging.getLogger(__name__)

PARAMETERS, SAMPLED, MEAN = "latent_parameters", "sampled", "mean"
RANDOM_OPS = ("RandomNormalLike", "RandomNormal")


class TileNoise:
    """The generator handed to the engine for one tile: its slice of the whole latent's noise."""

    def __init__(self, noise: np.ndarray) -> None:
        self.noise = noise
        self.used = False

    def standard_normal(self, size: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        if self.used or tuple(size) != self.noise.shape:
            raise FrameError(f"vae_encoder: its random op asks for noise of shape {tuple(size)}; frame expects one "
                             f"draw of the latent's shape {self.noise.shape} (a traced latent_dist.sample())")
        self.used = True
        return self.noise.astype(dtype)

    def random(self, size: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        raise FrameError("vae_encoder: the graph draws uniform noise; only latent_dist.sample()'s normal draw "
                         "is understood")


def encoder_style(model: Runnable) -> str:
    """Which of the three export styles ``model`` is (see the module docstring)."""
    names = {o.name for o in model.outputs}
    if "sample" not in {i.name for i in model.inputs}:
        raise FrameError("vae_encoder: the ONNX model has no 'sample' input "
                         f"(inputs: {', '.join(i.name for i in model.inputs)})")
    if PARAMETERS in names:
        return PARAMETERS
    if "latent_sample" not in names:
        raise FrameError(f"vae_encoder: the ONNX model has neither a 'latent_parameters' nor a 'latent_sample' "
                         f"output (outputs: {', '.join(sorted(names))})")
    counts = model.op_counts
    return SAMPLED if any(counts.get(op) for op in RANDOM_OPS) else MEAN


def _static_size(model: Runnable) -> tuple[int, int] | None:
    shape = next(i for i in model.inputs if i.name == "sample").shape
    if shape and len(shape) == 4 and isinstance(shape[2], int) and isinstance(shape[3], int):
        return shape[2], shape[3]
    return None


def _run(model: Runnable, style: str, pixels: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """One encoder run: the 8-channel moments (PARAMETERS) or the 4-channel latent."""
    spec = next(i for i in model.inputs if i.name == "sample")
    feeds = {"sample": pixels.astype(spec.dtype or np.float32)}
    if style == SAMPLED:
        generator = TileNoise(noise)
        out = model.run(feeds, rng=generator)
        if not generator.used:
            raise FrameError("vae_encoder: its random op did not run (frame cannot tell how it samples)")
    else:
        out = model.run(feeds)
    result = out[PARAMETERS if style == PARAMETERS else "latent_sample"].astype(np.float32)
    if result.ndim != 4 or result.shape[0] != 1 or result.shape[2:] != noise.shape[2:]:
        raise FrameError(f"vae_encoder: output has shape {result.shape}, expected 1 x C x {noise.shape[2]} x "
                         f"{noise.shape[3]} for a {pixels.shape[3]}x{pixels.shape[2]} picture")
    return result


def _tiles(latent_hw: tuple[int, int], tile_hw: tuple[int, int], overlap: int) -> list[tuple[int, int, int, int]]:
    """(y, x, tile height, tile width) in latent pixels, with the decoder's tile layout."""
    ys = tile_starts(latent_hw[0], tile_hw[0], overlap)
    xs = tile_starts(latent_hw[1], tile_hw[1], overlap)
    th, tw = min(tile_hw[0], latent_hw[0]), min(tile_hw[1], latent_hw[1])
    return [(y, x, th, tw) for y in ys for x in xs]


def _tile_weights(starts: list[int], index: int, length: int) -> np.ndarray:
    start = starts[index]
    previous_end = starts[index - 1] + length if index else None
    next_start = starts[index + 1] if index + 1 < len(starts) else None
    return edge_weights(start, length, previous_end, next_start, 1)


def encode_tiled(model: Runnable, style: str, pixels: np.ndarray, noise: np.ndarray, factor: int,
                 tile_hw: tuple[int, int], overlap: int, progress: Callable[[float], None] | None = None
                 ) -> np.ndarray:
    """Tile by tile, blended in latent space; the noise is sliced, never redrawn, per tile."""
    height, width = noise.shape[2:]
    tiles = _tiles((height, width), tile_hw, overlap)
    ys = sorted({t[0] for t in tiles})
    xs = sorted({t[1] for t in tiles})
    total = weight_sum = None
    for done, (y, x, th, tw) in enumerate(tiles, 1):
        crop = np.ascontiguousarray(pixels[:, :, y * factor:(y + th) * factor, x * factor:(x + tw) * factor])
        result = _run(model, style, crop, np.ascontiguousarray(noise[:, :, y:y + th, x:x + tw]))
        if total is None:
            total = np.zeros((1, result.shape[1], height, width), dtype=np.float32)
            weight_sum = np.zeros((height, width), dtype=np.float32)
        weight = _tile_weights(ys, ys.index(y), th)[:, None] * _tile_weights(xs, xs.index(x), tw)[None, :]
        total[:, :, y:y + th, x:x + tw] += result * weight
        weight_sum[y:y + th, x:x + tw] += weight
        if progress is not None:
            progress(done / len(tiles))
    assert total is not None and weight_sum is not None
    return total / weight_sum


def posterior_sample(moments: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``DiagonalGaussianDistribution(moments).sample()`` with ``noise`` as the draw."""
    channels = moments.shape[1] // 2
    mean, logvar = moments[:, :channels], np.clip(moments[:, channels:], -30.0, 20.0)
    return (mean + np.exp(np.float32(0.5) * logvar) * noise).astype(np.float32)


def encode(load: Callable[[str], Runnable], source: str, pixels: np.ndarray, noise: np.ndarray, scaling_factor: float,
           factor: int = 8, tile: int = 32, overlap: int = 8, tiled: bool | None = None,
           progress: Callable[[float], None] | None = None) -> np.ndarray:
    """(1, 3, H, W) pixels in [-1, 1] → ``scaling_factor`` × the posterior sample with draw ``noise``.

    ``noise``: standard normal of the latent's shape (1, 4, H / factor, W / factor). ``tiled=None``
    tiles when the latent is larger than ``tile`` (or than a static encoder input); True/False force it.
    """
    if not 0 <= overlap < tile:
        raise UsageError(f"VAE tile overlap must be at least 0 and smaller than the tile ({tile}), got {overlap}")

    def run(model: Runnable) -> tuple[str, np.ndarray]:
        style = encoder_style(model)
        static = _static_size(model)
        height, width = noise.shape[2:]
        static_latent = (static[0] // factor, static[1] // factor) if static else None
        if static_latent and (height < static_latent[0] or width < static_latent[1]):
            raise UsageError(f"vae_encoder has fixed input {static[1]}x{static[0]} pixels; the picture is only "
                             f"{width * factor}x{height * factor}")
        use_tiles, tile_hw = tile_plan((height, width), static_latent, tile, tiled)
        log.info("encoding the init image (%s) %s", style,
                 f"in {tile_hw[0]}x{tile_hw[1]} latent tiles" if use_tiles else "whole")
        if use_tiles:
            tile_overlap = min(overlap, min(tile_hw) // 2)  # a small fixed input size leaves room for less overlap
            return style, encode_tiled(model, style, pixels, noise, factor, tile_hw, tile_overlap, progress)
        result = _run(model, style, pixels, noise)
        if progress is not None:
            progress(1.0)
        return style, result

    style, result = with_model(load, source, run)
    latent = posterior_sample(result, noise) if style == PARAMETERS else result
    return (np.float32(scaling_factor) * latent).astype(np.float32)
