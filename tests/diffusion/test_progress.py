"""Latent previews and the ETA clock."""

from __future__ import annotations

import numpy as np
import pytest

from frame.diffusion.progress import LATENT_RGB, EtaClock, Progress, latent_preview


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_preview_projects_each_latent_pixel_linearly(kind):
    latents = np.zeros((1, 4, 6, 10), np.float32)
    latents[0, :, 2, 3] = [1.0, -0.5, 0.25, 0.0]
    image = latent_preview(latents, kind, scale=2)
    assert image.size == (20, 12) and image.mode == "RGB"
    factors, bias = LATENT_RGB[kind]
    expected = np.clip((np.array([1.0, -0.5, 0.25, 0.0]) @ factors + bias + 1) * 127.5, 0, 255).round()
    assert tuple(image.getpixel((6, 4))) == tuple(int(v) for v in expected)
    background = np.clip((bias + 1) * 127.5, 0, 255).round()
    assert tuple(image.getpixel((0, 0))) == tuple(int(v) for v in background)


def test_progress_preview_prefers_the_clean_estimate():
    noisy = np.full((1, 4, 2, 2), 3.0, np.float32)
    clean = np.zeros((1, 4, 2, 2), np.float32)
    progress = Progress("unet", 1, 4, 0.0, 0.25, 9.0, True, noisy, clean)
    assert progress.preview().getpixel((0, 0)) == (128, 128, 128)
    assert Progress("text", 0, 4, 0.0, 0.0, None).preview() is None


def test_eta_clock_counts_only_work_since_restart(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("frame.diffusion.progress.time.monotonic", lambda: now[0])
    clock = EtaClock(first_step=2, steps=10)  # resumed at step 2
    assert clock.eta(2, 0.0) is None
    now[0] = 120.0  # 20 s for one step
    assert clock.eta(3, 0.0) == pytest.approx(140.0)  # 7 steps left
    assert clock.fraction(3, 0.5) == pytest.approx(0.35)
    assert clock.eta(10, 0.0) == 0.0
