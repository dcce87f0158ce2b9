"""The component kinds the engine fixtures cover: model, I/O names, dynamic axes and seeded inputs.

Names follow optimum's ONNX export configs (optimum/exporters/onnx/model_configs.py:
UNetOnnxConfig, VaeDecoderOnnxConfig, CLIPTextOnnxConfig, CLIPTextWithProjectionOnnxConfig).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tiny_models as tm
import torch

# Shapes used for tracing. Dynamo specialises dims of size 0/1, so traced batch sizes are 2.
TRACE = {"batch": 2, "height": 8, "width": 12, "seq": 77}


@dataclass
class Component:
    """Everything needed to export and feed one architecture."""

    arch: str
    module: torch.nn.Module
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, dict[int, str]]
    make_inputs: Callable[[np.random.Generator, dict[str, Any]], dict[str, np.ndarray]]
    config: dict[str, Any] = field(default_factory=dict)


def _jsonable(config: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()}


def _timestep(rng: np.random.Generator, kind: str, batch: int) -> np.ndarray:
    """Timestep in one of the conventions found in published exports.

    float32_1d: optimum 1.x (shape [steps], float); int64_1d: early optimum / diffusers scripts;
    float32_scalar: current optimum-onnx (0-d float).
    """
    value = float(rng.integers(1, 1000))
    if kind == "float32_scalar":
        return np.array(value, dtype=np.float32)
    dtype = np.int64 if kind == "int64_1d" else np.float32
    return np.full((batch,), value, dtype=dtype)


def unet_component(seed: int, sdxl: bool, timestep: str) -> Component:
    """SD 1.5-like or SDXL-like (text_time) UNet2DConditionModel."""
    config = tm.SDXL_UNET if sdxl else tm.SD15_UNET
    model = tm.UNetWrapper(tm.unet(seed, config), text_time=sdxl)
    names = ["sample", "timestep", "encoder_hidden_states"] + (["text_embeds", "time_ids"] if sdxl else [])
    axes = {
        "sample": {0: "batch_size", 2: "height", 3: "width"},
        "encoder_hidden_states": {0: "batch_size", 1: "sequence_length"},
        "out_sample": {0: "batch_size", 2: "height", 3: "width"},
    }
    if timestep != "float32_scalar":
        axes["timestep"] = {0: "steps"}
    if sdxl:
        axes.update({"text_embeds": {0: "batch_size"}, "time_ids": {0: "batch_size"}})

    def make_inputs(rng: np.random.Generator, shape: dict[str, Any]) -> dict[str, np.ndarray]:
        b, h, w, s = shape["batch"], shape["height"], shape["width"], shape["seq"]
        feeds = {
            "sample": rng.standard_normal((b, 4, h, w)).astype(np.float32),
            "timestep": _timestep(rng, timestep, shape.get("steps", b)),
            "encoder_hidden_states": rng.standard_normal((b, s, config["cross_attention_dim"])).astype(
                np.float32
            ),
        }
        if sdxl:
            width = config["projection_class_embeddings_input_dim"] - 6 * config["addition_time_embed_dim"]
            feeds["text_embeds"] = rng.standard_normal((b, width)).astype(np.float32)
            size = [h * 8, w * 8, 0, 0, h * 8, w * 8]  # original size, crop top-left, target size
            feeds["time_ids"] = np.tile(np.array(size, dtype=np.float32), (b, 1))
        return feeds

    arch = "unet_sdxl" if sdxl else "unet_sd15"
    return Component(arch, model, names, ["out_sample"], axes, make_inputs, _jsonable(config))


def vae_decoder_component(seed: int) -> Component:
    """AutoencoderKL decoder incl. post_quant_conv: latent_sample -> sample (8x larger)."""
    model = tm.VaeDecoderWrapper(tm.vae(seed, tm.VAE))
    axes = {
        "latent_sample": {0: "batch_size", 2: "height_latent", 3: "width_latent"},
        "sample": {0: "batch_size", 2: "height", 3: "width"},
    }

    def make_inputs(rng: np.random.Generator, shape: dict[str, Any]) -> dict[str, np.ndarray]:
        z = rng.standard_normal((shape["batch"], 4, shape["height"], shape["width"]))
        return {"latent_sample": z.astype(np.float32)}

    return Component("vae_decoder", model, ["latent_sample"], ["sample"], axes, make_inputs, _jsonable(tm.VAE))


def clip_component(seed: int, projection: bool, hidden_states: bool, ids_dtype: str) -> Component:
    """CLIPTextModel / CLIPTextModelWithProjection with optimum's output names."""
    model = tm.ClipTextWrapper(tm.clip_text(seed, tm.CLIP_TEXT, with_projection=projection), hidden_states)
    outputs = model.output_names()
    axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch_size", 1: "sequence_length"}}
    for name in outputs:
        axes[name] = {0: "batch_size"} if name in ("pooler_output", "text_embeds") else {
            0: "batch_size",
            1: "sequence_length",
        }
    cfg = tm.CLIP_TEXT

    def make_inputs(rng: np.random.Generator, shape: dict[str, Any]) -> dict[str, np.ndarray]:
        b, s = shape["batch"], shape["seq"]
        ids = np.full((b, s), cfg["eos_token_id"], dtype=np.int64)
        if b > 1:
            ids[1:] = 0  # SDXL tokenizer_2 style: pad with "!" (id 0) after the EOS
        for row in range(b):
            n = int(rng.integers(1, s - 2))
            ids[row, 0] = cfg["bos_token_id"]
            ids[row, 1 : n + 1] = rng.integers(2, cfg["bos_token_id"], n)
            ids[row, n + 1] = cfg["eos_token_id"]
        return {"input_ids": ids.astype(ids_dtype)}

    arch = "clip_text_with_projection" if projection else "clip_text"
    return Component(arch, model, ["input_ids"], outputs, axes, make_inputs, _jsonable(cfg))
