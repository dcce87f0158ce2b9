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


@pytest.mark.parametrize("weights", ["fp16", "uint8"])
def test_imported_folder_runs_in_onnxruntime(tmp_path, weights):
    """The import is a plain diffusers ONNX folder: onnxruntime (dev-only) loads every graph and runs the
    UNet. The fixture's weights are float16 values, so the fp16 import predicts exactly what the fp32
    one does; uint8's per-channel rounding moves it a little."""
    ort = pytest.importorskip("onnxruntime")
    folders = {}
    for precision in ("fp32", weights):
        folders[precision] = tmp_path / precision
        import_model(str(FIXTURES / "sd15.safetensors"), folders[precision],
                     ImportOptions(weights=precision, config_dir=str(FIXTURES / "sd15")), frame_builders("sd1"))
    rng = np.random.default_rng(0)
    feeds = {"sample": rng.standard_normal((2, 4, 8, 8), dtype=np.float32),
             "timestep": np.array([500.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((2, 77, 16), dtype=np.float32)}
    outputs = {}
    for precision, folder in folders.items():
        for graph in ("text_encoder", "vae_decoder", "vae_encoder"):
            ort.InferenceSession(str(folder / graph / "model.onnx"), providers=["CPUExecutionProvider"])
        unet = ort.InferenceSession(str(folder / "unet" / "model.onnx"), providers=["CPUExecutionProvider"])
        outputs[precision] = unet.run(None, {i.name: feeds[i.name] for i in unet.get_inputs()})[0]
    error = np.abs(outputs[weights] - outputs["fp32"]).max() / np.abs(outputs["fp32"]).max()
    assert error == 0 if weights == "fp16" else 0 < error < 0.1
