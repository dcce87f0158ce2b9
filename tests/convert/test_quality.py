"""Issue 11's quality bar on the committed tiny pipelines: the final picture from fp16 weights within
40 dB PSNR of the fp32 picture, from uint8 weights within 30 dB (same prompt, seed and sampler).
benchmarks/quant_schemes.py --tiny measures the same over more prompts and every candidate scheme."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frame.convert.files import Options, convert
from frame.diffusion import load_pipeline
from tests.painting import paint

PIPELINES = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines"
TARGET_DB = {"fp16": 40.0, "uint8": 30.0}


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0 ** 2 / mse))


def _picture(folder: Path, kind: str) -> np.ndarray:
    pipe = load_pipeline(folder)
    return np.asarray(paint(pipe, "a lighthouse on a cliff at dusk, oil painting", steps=4, sampler="euler",
                                    guidance=5.0 if kind == "sdxl" else 7.5, seed=11, width=96, height=64))


@pytest.fixture(scope="module")
def references():
    return {kind: _picture(PIPELINES / kind / "model", kind) for kind in ("sd15", "sdxl")}


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
@pytest.mark.parametrize("weights", ["fp16", "uint8"])
def test_converted_pipeline_paints_the_fp32_picture(tmp_path, references, kind, weights):
    folder = tmp_path / f"{kind}-{weights}"
    reports = convert(PIPELINES / kind / "model", folder, Options(weights))
    assert reports["unet/model.onnx"].converted  # the picture really comes from converted weights
    picture = _picture(folder, kind)
    value = psnr(picture, references[kind])
    assert TARGET_DB[weights] <= value < float("inf"), f"{kind} {weights}: {value:.1f} dB"
