"""``frame model convert --lora FILE:SCALE`` merges a LoRA into the written weights, and
``frame model lora-check`` names the keys that match nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from frame.cli.program import main as frame_main
from frame.engine import load_model
from frame.engine.lora import LoraUse, read_lora

SD15 = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sd15"
SDXL_LORA = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sdxl" / "loras" / "ink.safetensors"


def _run(unet: Path, uses=()) -> np.ndarray:
    rng = np.random.default_rng(0)
    feeds = {"sample": rng.standard_normal((1, 4, 8, 12), dtype=np.float32), "timestep": np.array([500.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((1, 77, 32), dtype=np.float32)}
    with load_model(str(unet), loras=list(uses)) as model:
        return next(iter(model.run(feeds).values()))


def test_convert_merges_the_lora(tmp_path):
    lora = SD15 / "loras" / "ink.safetensors"
    assert frame_main(["model", "convert", str(SD15 / "model"), str(tmp_path / "m"), "--weights", "fp16",
                       "--lora", f"{lora}:0.5"]) == 0
    assert frame_main(["model", "convert", str(SD15 / "model"), str(tmp_path / "plain"), "--weights", "fp16"]) == 0
    streamed = _run(SD15 / "model" / "unet" / "model.onnx", [LoraUse("ink", read_lora(lora).modules("unet"), 0.5)])
    merged, plain = _run(tmp_path / "m" / "unet" / "model.onnx"), _run(tmp_path / "plain" / "unet" / "model.onnx")
    fp16_error = np.abs(plain - _run(SD15 / "model" / "unet" / "model.onnx")).max()
    assert np.abs(merged - plain).max() > 20 * fp16_error  # the LoRA is in the written weights
    assert np.abs(merged - streamed).max() <= 3 * fp16_error + 1e-4


def test_lora_check_lists_keys_that_match_nothing(capsys):
    assert frame_main(["model", "lora-check", str(SD15 / "loras" / "ink.safetensors"), "--model",
                       str(SD15 / "model")]) == 0
    assert "every module matches a layer" in capsys.readouterr().out
    assert frame_main(["model", "lora-check", str(SDXL_LORA), "--model", str(SD15 / "model")]) == 1
    out = capsys.readouterr().out
    assert "not applied: up_blocks_0_attentions_1_transformer_blocks_1_ff_net_2 (no layer of that name)" in out
