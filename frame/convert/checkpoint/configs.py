"""Each component's diffusers/transformers config, from the shapes of its weights (diffusers names) and
the known values of the architecture where shapes say nothing.

Shapes give the channels per level, the blocks per level, where attention is, the transformer depth
per level, the cross-attention width, linear or convolutional projections, the text encoders' widths,
depths, vocabulary and positions. They do not give the number of attention heads, the GroupNorm group
count or the activation, so those are the published models' values: SD 1.x UNet 8 heads per block; SD
2.x and SDXL 64 channels per head (``attention_head_dim`` is diffusers' name for the head count);
CLIP text towers 64 channels per head; GroupNorm 32 groups; OpenAI CLIP ``quick_gelu``, OpenCLIP
``gelu``. A checkpoint of other widths (the tiny test models) brings its own values with ``--config-from``
(a diffusers folder with the components' config.json, as diffusers' ``from_single_file(config=...)``),
which are checked against the shapes before use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from frame.errors import UsageError

SD1, SD2, SDXL = "sd1", "sd2", "sdxl"
HEAD_CHANNELS = 64
GROUPS = 32
VAE_SCALING = {SD1: 0.18215, SD2: 0.18215, SDXL: 0.13025}
SDXL_TIME_IDS = 6  # original size, crop top-left, target size: 2 numbers each


def _levels(shapes: Mapping[str, tuple[int, ...]], part: str) -> int:
    found = [int(m.group(1)) for k in shapes if (m := re.match(rf"{part}\.(\d+)\.", k))]
    return 1 + max(found, default=-1)


def _count(shapes: Mapping[str, tuple[int, ...]], pattern: str) -> int:
    found = {int(m.group(1)) for k in shapes if (m := re.match(pattern, k))}
    return 1 + max(found, default=-1)


def unet_config(shapes: Mapping[str, tuple[int, ...]], family: str, sample_size: int,
                pooled_width: int | None = None) -> dict:
    """UNet2DConditionModel's config for weights named as diffusers names them."""
    levels = _levels(shapes, "down_blocks")
    layers = _count(shapes, r"down_blocks\.0\.resnets\.(\d+)\.")
    channels = [shapes[f"down_blocks.{i}.resnets.0.conv1.weight"][0] for i in range(levels)]
    attention = [f"down_blocks.{i}.attentions.0.proj_in.weight" in shapes for i in range(levels)]
    depth = [_count(shapes, rf"down_blocks\.{i}\.attentions\.0\.transformer_blocks\.(\d+)\.") if attention[i] else 1
             for i in range(levels)]
    up_attention = [f"up_blocks.{i}.attentions.0.proj_in.weight" in shapes for i in range(levels)]
    if up_attention != attention[::-1]:
        raise UsageError(f"the UNet's up blocks have attention at levels {up_attention}, its down blocks at "
                         f"{attention}: not a Stable Diffusion UNet")
    to_k = next(s for k, s in shapes.items() if k.endswith("attn2.to_k.weight"))
    proj_in = next(s for k, s in shapes.items() if k.endswith("attentions.0.proj_in.weight"))
    heads: int | list[int] = 8 if family == SD1 else [max(1, c // HEAD_CHANNELS) for c in channels]
    config: dict = {
        "_class_name": "UNet2DConditionModel",
        "act_fn": "silu",
        "attention_head_dim": heads,
        "block_out_channels": channels,
        "center_input_sample": False,
        "cross_attention_dim": to_k[1],
        "down_block_types": ["CrossAttnDownBlock2D" if a else "DownBlock2D" for a in attention],
        "downsample_padding": 1,
        "flip_sin_to_cos": True,
        "freq_shift": 0,
        "in_channels": shapes["conv_in.weight"][1],
        "layers_per_block": layers,
        "mid_block_scale_factor": 1,
        "norm_eps": 1e-05,
        "norm_num_groups": GROUPS,
        "out_channels": shapes["conv_out.weight"][0],
        "sample_size": sample_size,
        "transformer_layers_per_block": depth[0] if len(set(depth)) == 1 else depth,
        "up_block_types": ["CrossAttnUpBlock2D" if a else "UpBlock2D" for a in attention[::-1]],
        "use_linear_projection": len(proj_in) == 2,
    }
    if "add_embedding.linear_1.weight" in shapes:
        adm = shapes["add_embedding.linear_1.weight"][1]
        if pooled_width is None or (adm - pooled_width) % SDXL_TIME_IDS or adm <= pooled_width:
            raise UsageError(f"the UNet's added conditioning takes {adm} numbers, which does not fit the second "
                             f"text encoder's pooled width {pooled_width} plus {SDXL_TIME_IDS} time ids")
        config.update(addition_embed_type="text_time", addition_time_embed_dim=(adm - pooled_width) // SDXL_TIME_IDS,
                      projection_class_embeddings_input_dim=adm, addition_embed_type_num_heads=64)
    return config


def vae_config(shapes: Mapping[str, tuple[int, ...]], family: str, sample_size: int) -> dict:
    """AutoencoderKL's config for weights named as diffusers names them."""
    levels = _levels(shapes, "encoder.down_blocks")
    channels = [shapes[f"encoder.down_blocks.{i}.resnets.0.conv1.weight"][0] for i in range(levels)]
    return {
        "_class_name": "AutoencoderKL",
        "act_fn": "silu",
        "block_out_channels": channels,
        "down_block_types": ["DownEncoderBlock2D"] * levels,
        "force_upcast": True,
        "in_channels": shapes["encoder.conv_in.weight"][1],
        "latent_channels": shapes["post_quant_conv.weight"][0],
        "layers_per_block": _count(shapes, r"encoder\.down_blocks\.0\.resnets\.(\d+)\."),
        "norm_num_groups": GROUPS,
        "out_channels": shapes["decoder.conv_out.weight"][0],
        "sample_size": sample_size,
        "scaling_factor": VAE_SCALING[family],
        "up_block_types": ["UpDecoderBlock2D"] * levels,
    }


def text_config(shapes: Mapping[str, tuple[int, ...]], open_clip: bool) -> dict:
    """CLIPTextConfig for a CLIP text tower named as transformers names it (``text_model.*``)."""
    vocab, hidden = shapes["text_model.embeddings.token_embedding.weight"]
    projection = shapes.get("text_projection.weight")
    return {
        "architectures": ["CLIPTextModelWithProjection" if projection else "CLIPTextModel"],
        "attention_dropout": 0.0,
        "bos_token_id": 0,
        "dropout": 0.0,
        "eos_token_id": 2,
        "hidden_act": "gelu" if open_clip else "quick_gelu",
        "hidden_size": hidden,
        "initializer_factor": 1.0,
        "initializer_range": 0.02,
        "intermediate_size": shapes["text_model.encoder.layers.0.mlp.fc1.weight"][0],
        "layer_norm_eps": 1e-05,
        "max_position_embeddings": shapes["text_model.embeddings.position_embedding.weight"][0],
        "model_type": "clip_text_model",
        "num_attention_heads": max(1, hidden // HEAD_CHANNELS),
        "num_hidden_layers": _count(shapes, r"text_model\.encoder\.layers\.(\d+)\."),
        "pad_token_id": 1,
        "projection_dim": projection[0] if projection else hidden,
        "vocab_size": vocab,
    }


# Fields a --config-from file must agree on with what the shapes say (the rest it may set freely).
CHECKED = {
    "unet": ("block_out_channels", "layers_per_block", "cross_attention_dim", "in_channels", "out_channels",
             "down_block_types", "up_block_types", "use_linear_projection", "projection_class_embeddings_input_dim"),
    "vae": ("block_out_channels", "layers_per_block", "in_channels", "out_channels", "latent_channels"),
    "text_encoder": ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size", "max_position_embeddings"),
}


def overridden(name: str, derived: dict, given: dict | None, where: str) -> dict:
    """``given`` (a --config-from component config) when it agrees with the shapes, else a UsageError."""
    if given is None:
        return derived
    kind = "text_encoder" if name.startswith("text_encoder") else name
    for key in CHECKED[kind]:
        want, have = derived.get(key), given.get(key)
        if key in derived and _norm(want) != _norm(have):
            raise UsageError(f"{where}: {key} is {have!r}, but the checkpoint's {name} weights say {want!r}")
    return {**given}


def _norm(value):
    return list(value) if isinstance(value, (list, tuple)) else value
