"""SDXL time_ids for refiner-type exports (``requires_aesthetics_score``), as StableDiffusionXLImg2ImgPipeline.

diffusers' ``_get_add_time_ids``: with ``requires_aesthetics_score`` the positive row is (original
height, width, crop top, left, aesthetic_score=6.0) and the negative row ends in 2.5; otherwise both rows
are (h, w, 0, 0, h, w), the same as text-to-image at the render size.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import load_pipeline
from frame.diffusion.denoise import GuidedUNet
from frame.errors import FrameError
from tests.diffusion.test_denoise import COND, LATENT, UNCOND, FakeUNet, Spec, specs
from tests.painting import paint

SDXL = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sdxl" / "model"


def _aesthetic_specs():
    five = Spec("time_ids", np.dtype(np.float32), ("batch", 5))
    return [five if s.name == "time_ids" else s for s in specs(sdxl=True)]


def test_refiner_type_time_ids_carry_the_aesthetic_scores():
    model = FakeUNet(_aesthetic_specs())
    GuidedUNet(model, COND, UNCOND, 5.0, (96, 64), "batched", aesthetic_scores=(2.5, 6.0))(LATENT, np.float32(500.0))
    np.testing.assert_array_equal(model.feeds[0]["time_ids"], [[64, 96, 0, 0, 2.5], [64, 96, 0, 0, 6.0]])
    model = FakeUNet(_aesthetic_specs())
    GuidedUNet(model, COND, None, 1.0, (96, 64), aesthetic_scores=(2.5, 6.0))(LATENT, np.float32(500.0))
    np.testing.assert_array_equal(model.feeds[0]["time_ids"], [[64, 96, 0, 0, 6.0]])  # no guidance: positive


def test_a_time_ids_width_the_config_does_not_give_is_named():
    with pytest.raises(FrameError, match="takes 5 time_ids but the model's config gives 6"):
        GuidedUNet(FakeUNet(_aesthetic_specs()), COND, UNCOND, 5.0, (96, 64))
    with pytest.raises(FrameError, match="takes 6 time_ids but the model's config gives 5"):
        GuidedUNet(FakeUNet(specs(sdxl=True)), COND, UNCOND, 5.0, (96, 64), aesthetic_scores=(2.5, 6.0))


def test_model_index_flag_reaches_the_unet(tmp_path):
    folder = tmp_path / "sdxl"
    shutil.copytree(SDXL, folder)
    assert not load_pipeline(folder).info.requires_aesthetics_score
    index = json.loads((folder / "model_index.json").read_text())
    (folder / "model_index.json").write_text(json.dumps({**index, "requires_aesthetics_score": True}))
    pipe = load_pipeline(folder)
    assert pipe.info.requires_aesthetics_score
    with pytest.raises(FrameError, match="takes 6 time_ids but the model's config gives 5"):
        paint(pipe, "x", steps=1, width=64, height=64)  # this UNet was trained without the score
