"""Per-step previews (issue 44 item 3): TAESD's decode of the current latent with a tiny VAE configured,
the fixed projection without one, none with ``render.previews: false``; a render writes them to
``JOB_DIR/preview.png`` through the worker's ProgressRelay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from frame.diffusion.previews import PREVIEW_LATENT, TinyPreviewer, pooled, previewer_for, projection_preview
from frame.diffusion.progress import Progress
from frame.engine import load_model
from frame.worker.render import ProgressRelay
from tests.diffusion.test_tiny_vae import _setup, tiny  # noqa: F401  (the fixture: STATE/models/taesd)


def _step(latents: np.ndarray) -> Progress:
    return Progress("unet", 1, 4, 0.0, 0.5, 10.0, step_done=True, denoised=latents)


def test_pooled_brings_a_side_to_the_preview_size():
    x = np.arange(2 * 4 * 96 * 64, dtype=np.float32).reshape(2, 4, 96, 64)
    p = pooled(x)
    assert p.shape == (2, 4, 32, 21) and max(p.shape[2:]) <= PREVIEW_LATENT
    assert p[0, 0, 0, 0] == pytest.approx(x[0, 0, :3, :3].mean())
    small = np.ones((1, 4, 20, 30), np.float32)
    assert pooled(small).shape == small.shape


def test_the_tiny_preview_is_taesds_decode_of_the_latent(tiny: Path):  # noqa: F811
    pipe = _setup(tiny, "taesd").load()
    previewer = previewer_for(pipe, True)
    assert isinstance(previewer, TinyPreviewer)
    latents = np.random.default_rng(2).standard_normal((1, 4, 64, 64)).astype(np.float32)
    image = previewer(_step(latents))
    assert image.size == (256, 256)  # 32 latent pixels a side, TAESD's x8
    with load_model(pipe.vae_source) as model:
        want = model.run({"latent_sample": pooled(latents)})["sample"][0]  # scaling factor 1.0
    want = np.clip((want.transpose(1, 2, 0) + 1) * 127.5, 0, 255).round()
    assert np.abs(np.asarray(image, np.float32) - want).max() <= 1
    assert np.abs(np.asarray(image, np.float32) - np.asarray(projection_preview(_step(latents)).resize(
        (256, 256)), np.float32)).mean() > 5, "not the fixed projection"
    previewer.close()
    assert previewer(Progress("unet", 1, 4, 0.5, 0.4, 10.0)) is None  # between steps: nothing


def test_without_a_tiny_vae_the_projection_and_previews_can_be_off(tiny: Path):  # noqa: F811
    pipe = _setup(tiny, "").load()
    assert previewer_for(pipe, True) is projection_preview
    assert previewer_for(pipe, False) is None


def test_a_failing_tiny_decoder_falls_back_to_the_projection(tiny: Path, caplog):  # noqa: F811
    pipe = _setup(tiny, "taesd").load()

    def broken(path: str):
        raise MemoryError("no room")

    previewer = TinyPreviewer(broken, pipe.tiny_vae)
    latents = np.zeros((1, 4, 8, 8), np.float32)
    assert previewer(_step(latents)).size == (16, 16)  # the projection at twice the latent size
    assert "tiny VAE preview failed" in caplog.text


@pytest.mark.parametrize("enabled", [True, False])
def test_a_render_writes_the_tiny_preview_or_none(tiny: Path, tmp_path: Path, enabled: bool):  # noqa: F811
    pipe = _setup(tiny, "taesd").load()
    events = []
    previewer = previewer_for(pipe, enabled)
    relay = ProgressRelay(tmp_path, events.append, preview=previewer)
    pipe.generate(pipe.settings("a lighthouse", steps=2, guidance=0, seed=3, width=32, height=32), callback=relay)
    steps = [e for e in events if getattr(e, "step", None) is not None and e.stage == "generating (unet)"]
    assert steps and any(e.preview for e in steps) == enabled
    assert (tmp_path / "preview.png").exists() == enabled
    if enabled:
        assert Image.open(tmp_path / "preview.png").size == (32, 32)  # TAESD's decode: the picture's size
        previewer.close()
