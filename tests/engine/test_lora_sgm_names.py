"""An SDXL LoRA in sd-scripts' SGM block names (input_blocks_…, middle_block_…, output_blocks_…, resnets'
in_layers_2/out_layers_3) changes the same layers as the same LoRA in diffusers' names."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np

from frame.engine import load_model
from frame.engine.io.safetensors import read_header
from frame.engine.lora import LoraUse, read_lora

SDXL = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sdxl"
# the tiny SDXL UNet: layers_per_block 1, down blocks (plain, cross-attention), up blocks (cross-attention, plain)
RENAMES = [
    (r"down_blocks_0_resnets_0_", "input_blocks_1_0_"), (r"down_blocks_1_resnets_0_", "input_blocks_3_0_"),
    (r"down_blocks_1_attentions_0_", "input_blocks_3_1_"), (r"mid_block_resnets_0_", "middle_block_0_"),
    (r"mid_block_attentions_0_", "middle_block_1_"), (r"mid_block_resnets_1_", "middle_block_2_"),
    (r"up_blocks_0_resnets_(\d)_", lambda m: f"output_blocks_{m[1]}_0_"),
    (r"up_blocks_0_attentions_(\d)_", lambda m: f"output_blocks_{m[1]}_1_"),
    (r"up_blocks_1_resnets_(\d)_", lambda m: f"output_blocks_{2 + int(m[1])}_0_"),
    (r"_conv1$", "_in_layers_2"), (r"_conv2$", "_out_layers_3")]


def _sgm(module: str) -> str:
    for pattern, replacement in RENAMES:
        module = re.sub(pattern, replacement, module)
    return module


def _sgm_copy(src: Path, dst: Path) -> None:
    header = read_header(src)
    meta, blobs, offset = {}, [], 0
    for key, entry in header.tensors.items():
        stem, dot, suffix = key.partition(".")
        if stem.startswith("lora_unet_"):
            stem = "lora_unet_" + _sgm(stem[len("lora_unet_"):])
        with open(src, "rb") as f:
            f.seek(entry.start)
            data = f.read(entry.nbytes)
        meta[stem + dot + suffix] = {"dtype": entry.dtype, "shape": list(entry.shape),
                                     "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(meta).encode()
    dst.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_sgm_names_change_the_same_layers(tmp_path):
    sgm_file = tmp_path / "ink_sgm.safetensors"
    _sgm_copy(SDXL / "loras" / "ink.safetensors", sgm_file)
    original, renamed = read_lora(SDXL / "loras" / "ink.safetensors"), read_lora(sgm_file)
    assert any(k.startswith("output_blocks_1_1_transformer_blocks") for k in renamed.modules("unet"))
    rng = np.random.default_rng(0)
    feeds = {"sample": rng.standard_normal((1, 4, 8, 12), dtype=np.float32), "timestep": np.array([500.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((1, 77, 40), dtype=np.float32),
             "text_embeds": rng.standard_normal((1, 8), dtype=np.float32),
             "time_ids": np.array([[64, 96, 0, 0, 64, 96]], np.float32)}
    outputs = []
    for lora in (original, renamed):
        with load_model(str(SDXL / "model" / "unet" / "model.onnx"),
                        loras=[LoraUse("ink", lora.modules("unet"), 1.0)]) as model:
            assert not model.lora_report.unmatched, model.lora_report.lines()
            assert model.lora_report.applied["ink"] == len(original.modules("unet"))
            outputs.append(next(iter(model.run(feeds).values())))
    np.testing.assert_array_equal(outputs[0], outputs[1])
