"""The VAE tile layout: the fewest tiles whose counted peak fits the worker's memory (``tiles.choose``),
the owner's ``model.vae_tile`` first, and the chosen (rectangular) layouts decode without seams."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import RenderPlan, load_pipeline
from frame.diffusion.guidance_plan import WORKER_EXTRA_MB
from frame.diffusion.vae import tiles
from frame.diffusion.vae.tiles import layout_for
from frame.models import demo_model_path


def affine_peak(fixed: float, per_pixel: float):
    """A decoder whose peak grows with the tile's area, as the full-size SD decoder's count does
    (8-bit: 260 MB at 36x36, 399 MB at 64x36 with the worker's 28 MB)."""
    asked = []

    def peak(tile: tuple[int, int]) -> float:
        asked.append(tile)
        return fixed + per_pixel * tile[0] * tile[1]

    peak.asked = asked
    return peak


FULL_SIZE = affine_peak(82.0, 0.1375)


def test_the_64x64_latent_takes_2x2_tiles_of_36_within_440_mb():
    layout = tiles.choose((64, 64), 8, None, FULL_SIZE, 440)
    assert (layout.tile, layout.ys, layout.xs) == ((36, 36), (0, 28), (0, 28))
    assert layout.count == 4  # the fixed 32 took 9


def test_with_room_the_latent_is_decoded_whole():
    layout = tiles.choose((64, 64), 8, None, FULL_SIZE, 2000)
    assert (layout.count, layout.tile) == (1, (64, 64))


def test_rectangular_tiles_when_they_decode_less():
    # 64x36 tiles (two) fit a 600 MB worker: less work than 2x2 of 36
    layout = tiles.choose((64, 64), 8, None, FULL_SIZE, 600)
    assert layout.count == 2 and sorted(layout.tile) == [36, 64]
    wide = tiles.choose((64, 128), 8, None, FULL_SIZE, 440)
    assert wide.tile[0] != wide.tile[1]
    assert FULL_SIZE(wide.tile) + WORKER_EXTRA_MB <= 440 * (1 - tiles.MARGIN)


def test_the_chosen_layout_is_the_least_work_that_fits():
    for latent, limit in [((64, 64), 440), ((96, 64), 440), ((128, 128), 440), ((128, 96), 500), ((40, 200), 400)]:
        chosen = tiles.choose(latent, 8, None, FULL_SIZE, limit)
        budget = limit * (1 - tiles.MARGIN) - WORKER_EXTRA_MB
        assert FULL_SIZE(chosen.tile) <= budget
        work = chosen.count * chosen.tile[0] * chosen.tile[1]
        fitting = [c for c in tiles.candidates(latent, 8) if FULL_SIZE(c.tile) <= budget]
        assert work == min(c.count * c.tile[0] * c.tile[1] for c in fitting)
        covered = np.zeros(latent, bool)
        for y in chosen.ys:
            for x in chosen.xs:
                covered[y:y + chosen.tile[0], x:x + chosen.tile[1]] = True
        assert covered.all()
        assert all(b - a <= chosen.tile[0] - 8 for a, b in zip(chosen.ys, chosen.ys[1:]))  # overlap kept


def test_the_owners_vae_tile_wins():
    peak = affine_peak(82.0, 0.1375)
    layout = tiles.choose((64, 64), 8, 32, peak, 2000)
    assert (layout.tile, layout.count) == ((32, 32), 9)
    assert peak.asked == []


def test_without_a_peak_or_a_limit_the_default_tile():
    assert tiles.choose((64, 64), 8, None, None, 440).tile == (32, 32)
    assert tiles.choose((64, 64), 8, None, FULL_SIZE, None).tile == (32, 32)


def test_when_nothing_fits_the_least_memory():
    layout = tiles.choose((64, 64), 8, None, FULL_SIZE, 100)
    assert layout.tile == (16, 16) and "no layout" in layout.reason


def test_an_uncountable_decoder_keeps_the_default_tile():
    assert tiles.choose((64, 64), 8, None, lambda tile: None, 440).tile == (32, 32)


def test_a_fixed_decoder_input_is_its_tile():
    assert layout_for((64, 64), (32, 32), None, 8, None, FULL_SIZE, 2000).tile == (32, 32)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


SDXL_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sdxl" / "model"


@pytest.mark.parametrize("model", [demo_model_path(), SDXL_FIXTURE], ids=["sd15-demo", "sdxl-fixture"])
def test_the_chosen_tiles_decode_without_seams(model):
    """A 40x48 latent decoded whole and in the layouts a memory limit chooses (2x2 squares, 1x2
    rectangles), at overlaps 8 and 4; the tiny decoders' figures are in docs/estimate.md."""
    pipe = load_pipeline(model)
    latents = pipe.denoise_settings(pipe.settings("a harbour", steps=2, guidance=0, sampler="euler", seed=3,
                                                  width=384, height=320))
    whole = np.asarray(pipe.decode(latents, tiled=False))
    seen = set()
    for overlap, per_pixel in [(8, 0.2), (8, 0.3), (4, 0.3)]:
        pipe.use_plan(RenderPlan(vae_tile_overlap=overlap, memory_limit_mb=400,
                                 vae_peak_mb=affine_peak(40.0, per_pixel)))
        layout = layout_for((40, 48), None, None, overlap, None, pipe.plan.vae_peak_mb, 400)
        assert layout.count > 1
        seen.add(layout.tile)
        tiled = np.asarray(pipe.decode(latents))
        value = psnr(whole, tiled)
        print(f"{layout.describe()}: tiled vs untiled PSNR {value:.1f} dB, max error "
              f"{np.abs(whole.astype(int) - tiled.astype(int)).max()}")
        assert value >= 35.0
    assert any(t[0] != t[1] for t in seen)
