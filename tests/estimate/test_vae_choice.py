"""``frame estimate`` puts the night with the full VAE and with the tiny one side by side, the tiny
decoder's work and memory counted from its own graph (frame.estimate.vae)."""

from __future__ import annotations

from pathlib import Path

import pytest

from frame.estimate.configured import estimate_config
from frame.estimate.report import lines, to_dict
from tests.daemon.conftest import make_config
from tests.diffusion.test_tiny_vae import tiny  # noqa: F401  (the fixture: STATE/models/taesd)
from tests.estimate.test_guidance_modes import RATES


def _config(state: Path, value: str):
    return make_config(state, model={"source": "demo", "vae_decoder": value, "size": "256x256", "steps": 4},
                       worker={"memory_limit_mb": 300})


def _vae_seconds(night) -> float:
    return night.projections[1].phases["vae"]


def test_the_full_night_shows_the_tiny_one_beside_it(tiny: Path):  # noqa: F811
    result = estimate_config(_config(tiny, ""), rates=RATES, texts=0)
    assert result.vae_label == "the model's own VAE" and result.other_vae_label == "the tiny VAE (taesd)"
    full, small = result.estimate, result.other_vae
    assert small.plan.runs_of("vae")[0].count.macs != full.plan.runs_of("vae")[0].count.macs  # its own graph
    assert small.plan.runs_of("unet")[0].count.macs == full.plan.runs_of("unet")[0].count.macs
    assert _vae_seconds(small) != _vae_seconds(full)
    shown = [line for line in lines(result) if line.startswith("VAE: ")]
    assert shown[0].startswith("VAE: the model's own VAE (tonight): decode ")
    assert shown[1].startswith("VAE: the tiny VAE (taesd) instead: decode ")
    figures = to_dict(result, "test")
    assert figures["other_vae"]["label"] == "the tiny VAE (taesd)"
    assert figures["other_vae"]["decode_seconds_pi"] == pytest.approx(_vae_seconds(small), abs=0.1)


def test_a_tiny_night_shows_the_full_one_beside_it(tiny: Path):  # noqa: F811
    configured = estimate_config(_config(tiny, "taesd"), rates=RATES, texts=0)
    full = estimate_config(_config(tiny, ""), rates=RATES, texts=0)
    assert configured.other_vae_label == "the model's own VAE"
    assert _vae_seconds(configured.other_vae) == pytest.approx(_vae_seconds(full.estimate))
    assert _vae_seconds(configured.estimate) == pytest.approx(_vae_seconds(full.other_vae))


def test_no_tiny_vae_imported_no_line(tmp_path: Path):
    result = estimate_config(_config(tmp_path, ""), rates=RATES, texts=0)
    assert result.other_vae is None and not [line for line in lines(result) if line.startswith("VAE: ")]
    assert "other_vae" not in to_dict(result, "test")
