"""Dithering: vectorised kernels equal straightforward sequential references; averages hold."""

from __future__ import annotations

import numpy as np
import pytest

from frame.config.panels import get_palette
from frame.display import colour, dither
from frame.errors import UsageError

INKS = colour.srgb8_to_linear(np.array(get_palette("spectra6").colours, dtype=np.uint8))


def _picture(height: int = 24, width: int = 32, seed: int = 0) -> np.ndarray:
    """Random colours mixed from the inks (so everything is reproducible), as float32 linear."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(len(INKS)), size=(height, width)).astype(np.float32)
    return (weights @ INKS).astype(np.float32)


def _reference_raster(linear: np.ndarray, kernel: str) -> np.ndarray:
    """Textbook sequential error diffusion, one pixel at a time, same chooser and clamp."""
    height, width, _ = linear.shape
    buf = linear.astype(np.float32).copy()
    table = dither.ink_lookup(INKS)
    out = np.zeros((height, width), dtype=np.uint8)
    for y in range(height):
        for x in range(width):
            value = np.clip(buf[y, x], -0.5, 1.5)
            k = dither.lookup_inks(value[None], table)[0]
            out[y, x] = k
            error = value - INKS.astype(np.float32)[k]
            for dy, dx, weight in dither.KERNELS[kernel]:
                if y + dy < height and 0 <= x + dx < width:
                    buf[y + dy, x + dx] += weight * error
    return out


def _reference_serpentine(linear: np.ndarray) -> np.ndarray:
    height, width, _ = linear.shape
    buf = linear.astype(np.float64).copy()
    lookup = dither.ink_lookup(INKS).tolist()
    out = np.zeros((height, width), dtype=np.uint8)
    for y in range(height):
        buf[y] = np.clip(buf[y], -0.5, 1.5)
        step = -1 if y % 2 else 1
        xs = range(width - 1, -1, -1) if step < 0 else range(width)
        for x in xs:
            k = dither.choose_ink(*buf[y, x], lookup)
            out[y, x] = k
            error = buf[y, x] - INKS[k]
            for dy, dx, weight in ((0, 1, 7 / 16), (1, -1, 3 / 16), (1, 0, 5 / 16), (1, 1, 1 / 16)):
                tx = x + dx * step
                if y + dy < height and 0 <= tx < width:
                    buf[y + dy, tx] += weight * error
    return out


@pytest.mark.parametrize("kernel", ["floyd-steinberg", "atkinson"])
def test_wavefront_equals_sequential_error_diffusion(kernel) -> None:
    picture = _picture()
    assert np.array_equal(dither.error_diffusion(picture, INKS, kernel), _reference_raster(picture, kernel))


def test_serpentine_equals_sequential_serpentine() -> None:
    picture = _picture(seed=3)
    ours, reference = dither.serpentine(picture, INKS), _reference_serpentine(picture)
    assert np.array_equal(ours, reference)


def test_lookup_table_agrees_with_exact_perceptual_choice() -> None:
    rng = np.random.default_rng(1)
    pixels = rng.random((5000, 3)).astype(np.float32) ** 2
    exact = dither.nearest_ink(pixels, INKS)
    table = dither.ink_lookup(INKS)
    assert (dither.lookup_inks(pixels, table) == exact).mean() > 0.97
    lookup = table.tolist()
    scalar = [dither.choose_ink(*p, lookup) for p in pixels.astype(np.float64)]
    assert (np.array(scalar) == exact).mean() > 0.97


def _shown_mean(target: np.ndarray, method: str) -> np.ndarray:
    picture = np.tile(target.astype(np.float32), (64, 64, 1))
    indices = dither.dither_indices(picture, np.array(get_palette("spectra6").colours), method)
    assert indices.max() < len(INKS)
    return INKS[indices].reshape(-1, 3).mean(axis=0)


@pytest.mark.parametrize("method", ["linear-serpentine", "floyd-steinberg"])
def test_error_diffusion_keeps_the_average_light_of_a_three_ink_mix(method) -> None:
    target = 0.3 * INKS[0] + 0.5 * INKS[1] + 0.2 * INKS[4]  # a bluish grey
    assert np.allclose(_shown_mean(target, method), target, atol=0.01)


@pytest.mark.parametrize("method,tolerance", [("ordered", 0.01), ("blue-noise", 0.01), ("atkinson", 0.08)])
def test_other_methods_keep_the_average_light_of_a_grey(method, tolerance) -> None:
    # Threshold dithers mix two inks per pixel; Atkinson drops 1/4 of the error on purpose.
    target = 0.4 * INKS[0] + 0.6 * INKS[1]
    assert np.allclose(_shown_mean(target, method), target, atol=tolerance)


def test_no_dither_maps_pure_inks_exactly() -> None:
    indices = np.arange(len(INKS), dtype=np.uint8).reshape(2, 3)
    assert np.array_equal(dither.no_dither(INKS[indices], INKS), indices)


def test_blue_noise_mask_is_a_permutation_with_little_low_frequency_energy() -> None:
    mask = dither.blue_noise()
    assert mask.shape == (64, 64)
    assert len(np.unique(mask)) == 64 * 64
    white = np.random.default_rng(0).permutation(mask.ravel()).reshape(64, 64)

    def block_variance(m: np.ndarray) -> float:
        return float(m.reshape(16, 4, 16, 4).mean(axis=(1, 3)).var())

    assert block_variance(mask) < 0.25 * block_variance(white)


def test_engine_names_and_errors() -> None:
    assert dither.resolve_dither(None) == dither.resolve_dither("auto") == "linear-serpentine"
    with pytest.raises(UsageError, match="did you mean 'atkinson'"):
        dither.resolve_dither("atkinsn")
