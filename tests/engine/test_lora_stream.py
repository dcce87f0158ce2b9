"""A LoRA streamed into fp16 and 8-bit weights (decoded per block in the op) and through row-streamed
weights gives the float32 model's LoRA result; unknown or broken LoRAs are clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frame.convert.files import Options, convert
from frame.diffusion.loras import LoraRequest, check_prompts, find, split_tags
from frame.engine import load_model
from frame.engine.lora import LoraUse, read_lora
from frame.engine.passes import weight_decoding
from frame.errors import UsageError

SD15 = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sd15"
LORA = SD15 / "loras" / "ink.safetensors"


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"sample": rng.standard_normal((1, 4, 8, 12), dtype=np.float32),
            "timestep": np.array([500.0], np.float32),
            "encoder_hidden_states": rng.standard_normal((1, 77, 32), dtype=np.float32)}


def _unet(path: Path, scale: float | None) -> np.ndarray:
    uses = [] if scale is None else [LoraUse("ink", read_lora(LORA).modules("unet"), scale)]
    with load_model(str(path / "unet" / "model.onnx"), loras=uses) as model:
        if uses:
            assert model.lora_report.applied == {"ink": 64} and not model.lora_report.unmatched
        return next(iter(model.run(_feeds()).values()))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = {}
    for weights in ("fp16", "uint8"):
        folder = tmp_path_factory.mktemp(weights) / "model"
        convert(SD15 / "model", folder, Options(weights))
        out[weights] = folder
    return out


@pytest.mark.parametrize("weights", ["fp16", "uint8"])
def test_lora_on_decoded_weights_matches_float32(converted, weights, monkeypatch):
    # small blocks and row streaming even for the tiny weights: the per-block and per-row paths run
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 64)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 2)
    monkeypatch.setattr(weight_decoding, "STREAM_ROWS_MIN_BYTES", 0)
    reference, plain32 = _unet(SD15 / "model", 0.5), _unet(SD15 / "model", None)
    ours, plain = _unet(converted[weights], 0.5), _unet(converted[weights], None)
    quantisation = np.abs(plain - plain32).max()  # what the weights' format costs without a LoRA
    lora_effect = np.abs(reference - plain32).max()
    assert lora_effect > 20 * quantisation
    assert np.abs(ours - reference).max() <= 3 * quantisation + 1e-4


def test_tags_are_parsed_and_removed():
    text, requests = split_tags("a lighthouse <lora:ink:0.8>, woodcut <LORA:wood> <lora:x:0.5:1>")
    assert text == "a lighthouse, woodcut"
    assert requests == [LoraRequest("ink", 0.8), LoraRequest("wood", 1.0), LoraRequest("x", 1.0, 0.5)]
    assert LoraRequest("ink", 0.8).tag == "<lora:ink:0.8>"


def test_unknown_name_and_bad_scale_are_clear_errors(tmp_path):
    folders = [str(SD15 / "loras")]
    assert find(LoraRequest("ink"), folders) == str(LORA)
    problems = check_prompts(["sunset <lora:nope:1>", "<lora:ink:lots>", "<lora:../ink:1>"], folders)
    assert "unknown LoRA 'nope'" in problems[0] and "found: ink, reed, water, wood" in problems[0]
    assert "'lots' is not a number" in problems[1]
    assert "cannot contain a path" in problems[2]
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(UsageError, match="header length"):
        read_lora(broken)


def test_float32_feed_forward_weights_take_the_change_per_block():
    """The GEGLU feed-forward decodes its float32 weights per block: their change is added there (no
    merged copy of SDXL's 52 MB projection), other float32 weights are merged while their op runs."""
    uses = [LoraUse("ink", read_lora(LORA).modules("unet"), 1.0)]
    with load_model(str(SD15 / "model" / "unet" / "model.onnx"), loras=uses) as model:
        in_op = {d.label.split("/")[-2] for d in model.provider.deltas.values() if d.in_op}
        assert in_op == {"proj", "net.2"} and len(model.provider.deltas) == 64
