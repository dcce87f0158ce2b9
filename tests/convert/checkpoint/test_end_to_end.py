"""A checkpoint imported by frame paints diffusers' picture: the tiny SD 1.5, SD 2.x v-prediction and
SDXL single-file checkpoints through ``import_model`` (frame's graphs, weights streamed, fp32) and
frame's pipeline with torch's CPU noise (``model.noise: torch-cpu``), against the picture diffusers'
``from_single_file`` pipeline paints from the same file and seed (``reference.npz``, recorded by
tools/build_checkpoint_fixtures.py, so no torch here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from frame.convert.importer.graphs import frame_builders
from frame.convert.importer.writer import ImportOptions, import_model
from frame.diffusion import load_pipeline
from tests.convert.checkpoint.helpers import FIXTURES, KINDS
from tests.painting import paint

FAMILY = {"sd15": "sd1", "sd2v": "sd2", "sdxl": "sdxl"}


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("imported")
    for kind in KINDS:
        import_model(str(FIXTURES / f"{kind}.safetensors"), root / kind,
                     ImportOptions(weights="fp32", config_dir=str(FIXTURES / kind)), frame_builders(FAMILY[kind]))
    return root


@pytest.mark.parametrize("kind", KINDS)
def test_imported_checkpoint_paints_diffusers_picture(imported, kind):
    reference = np.load(FIXTURES / kind / "reference.npz")
    spec = json.loads(str(reference["settings"]))
    pipe = load_pipeline(imported / kind, noise="torch-cpu")
    args = (spec["prompt"], spec["negative_prompt"], spec["steps"], spec["guidance"], spec["sampler"])
    image = paint(pipe, *args, spec["seed"], spec["width"], spec["height"])
    assert psnr(np.asarray(image), reference["image"]) >= 40
    other = paint(pipe, *args, spec["seed"] + 1, spec["width"], spec["height"])
    assert psnr(np.asarray(other), reference["image"]) < 30  # the comparison can tell pictures apart


def test_sd2_import_predicts_v(imported):
    scheduler = json.loads((imported / "sd2v" / "scheduler" / "scheduler_config.json").read_text())
    assert scheduler["prediction_type"] == "v_prediction"
