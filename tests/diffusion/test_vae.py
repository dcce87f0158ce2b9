"""Tiled VAE decoding: tile layout, blending weights, and seamlessness on the demo decoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import load_pipeline
from frame.diffusion.vae.decoder import decode, decode_tiled, edge_weights
from frame.diffusion.vae.tiles import tile_starts
from frame.errors import UsageError
from frame.models import demo_model_path


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize(
    ("size", "tile", "overlap", "expected"),
    [(32, 32, 8, [0]), (20, 32, 8, [0]), (40, 32, 8, [0, 8]), (64, 32, 8, [0, 24, 32]), (128, 32, 8,
     [0, 24, 48, 72, 96])],
)
def test_tile_starts_cover_the_latent(size, tile, overlap, expected):
    starts = tile_starts(size, tile, overlap)
    assert starts == expected
    assert starts[-1] + min(tile, size) == size
    assert all(b - a <= tile - overlap for a, b in zip(starts, starts[1:]))


def test_edge_weights_form_a_partition_of_unity():
    size, tile, overlap, factor = 100, 32, 8, 2
    starts = tile_starts(size, tile, overlap)
    total = np.zeros(size * factor)
    for i, start in enumerate(starts):
        previous_end = starts[i - 1] + tile if i else None
        next_start = starts[i + 1] if i + 1 < len(starts) else None
        w = edge_weights(start, tile, previous_end, next_start, factor)
        assert w.min() > 0 and w.max() <= 1
        total[start * factor:(start + tile) * factor] += w
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)


class UpsampleModel:
    """A 'decoder' that is purely local (nearest ×4 of the first 3 channels): tiling must be exact."""

    class Spec:
        name, dtype, shape = "latent_sample", np.dtype(np.float32), ("b", 4, "h", "w")

    inputs = [Spec()]

    def __init__(self) -> None:
        self.calls = 0

    def run(self, feeds):
        self.calls += 1
        x = feeds["latent_sample"][:, :3]
        return {"sample": np.repeat(np.repeat(x, 4, axis=2), 4, axis=3)}


def test_tiled_equals_untiled_for_a_local_decoder():
    latents = np.random.default_rng(0).standard_normal((1, 4, 50, 70)).astype(np.float32)
    model = UpsampleModel()
    tiled = decode_tiled(model, latents, (16, 16), 4)
    assert model.calls == len(tile_starts(50, 16, 4)) * len(tile_starts(70, 16, 4))
    np.testing.assert_allclose(tiled, model.run({"latent_sample": latents})["sample"], rtol=1e-5, atol=1e-6)


def test_bad_overlap_is_rejected():
    with pytest.raises(UsageError, match="overlap"):
        decode(lambda source: UpsampleModel(), "x", np.zeros((1, 4, 8, 8), np.float32), 0.18, tile=8, overlap=8)


SDXL_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sdxl" / "model"


@pytest.mark.parametrize("model", [demo_model_path(), SDXL_FIXTURE], ids=["sd15-demo", "sdxl-fixture"])
def test_tiled_decode_is_seamless(model):
    """A 40×40 latent sampled by the pipeline, decoded whole and in 32×32 tiles (overlap 8)."""
    pipe = load_pipeline(model)
    latents = pipe.denoise_settings(pipe.settings("a harbour", steps=2, guidance=0, sampler="euler", seed=3, width=320,
                                                  height=320))
    whole = np.asarray(pipe.decode(latents, tiled=False))
    progress = []
    tiled = np.asarray(pipe.decode(latents, callback=progress.append))  # automatic: 40 > 32
    assert [round(p.op_fraction, 2) for p in progress] == [0.25, 0.5, 0.75, 1.0]
    assert whole.shape == tiled.shape == (320, 320, 3)
    value = psnr(whole, tiled)
    print(f"tiled vs untiled PSNR {value:.1f} dB")
    assert value >= 35.0
