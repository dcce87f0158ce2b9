"""Diffusers/transformers state dicts written back in the original single-file checkpoint layout.

Dev-only, for tools/build_checkpoint_fixtures.py: the reverse of what ``frame model import`` reads,
written from the diffusers configs (levels, blocks per level) rather than from frame's forward
mapping, so that a fixture checks frame against the layout as it is, not against frame's own idea of
it. Each fixture built with it is then loaded by diffusers' ``from_single_file`` and must give back
the original weights exactly, which is what makes these files "the real key layout".

Names follow CompVis/stablediffusion (SD 1.x, 2.x: ``model.diffusion_model.``, ``first_stage_model.``,
``cond_stage_model.transformer.`` / ``cond_stage_model.model.``) and Stability's generative-models
(SDXL: ``conditioner.embedders.0.transformer.`` and ``conditioner.embedders.1.model.``).
"""

from __future__ import annotations

import numpy as np

RESNET = {"norm1": "in_layers.0", "conv1": "in_layers.2", "norm2": "out_layers.0", "conv2": "out_layers.3",
          "time_emb_proj": "emb_layers.1", "conv_shortcut": "skip_connection"}
UNET_TOP = {"conv_in": "input_blocks.0.0", "time_embedding.linear_1": "time_embed.0",
            "time_embedding.linear_2": "time_embed.2", "add_embedding.linear_1": "label_emb.0.0",
            "add_embedding.linear_2": "label_emb.0.2", "conv_norm_out": "out.0", "conv_out": "out.2"}


def _resnet(rest: str) -> str:
    module, _, param = rest.partition(".")
    return f"{RESNET[module]}.{param}"


def unet_to_original(state: dict[str, np.ndarray], config: dict) -> dict[str, np.ndarray]:
    """``model.diffusion_model.*`` from a UNet2DConditionModel state dict."""
    per = config["layers_per_block"] + 1
    out = {}
    for key, value in state.items():
        parts = key.split(".")
        stem, param = ".".join(parts[:-1]), parts[-1]
        if stem in UNET_TOP:
            name = f"{UNET_TOP[stem]}.{param}"
        elif parts[0] == "down_blocks":
            level, kind = int(parts[1]), parts[2]
            rest = ".".join(parts[4:])
            if kind == "downsamplers":
                name = f"input_blocks.{(level + 1) * per}.0.op.{parts[-1]}"
            else:
                block = 1 + level * per + int(parts[3])
                name = (f"input_blocks.{block}.0.{_resnet(rest)}" if kind == "resnets"
                        else f"input_blocks.{block}.1.{rest}")
        elif parts[0] == "mid_block":
            rest = ".".join(parts[3:])
            name = (f"middle_block.{2 * int(parts[2])}.{_resnet(rest)}" if parts[1] == "resnets"
                    else f"middle_block.1.{rest}")
        elif parts[0] == "up_blocks":
            level, kind = int(parts[1]), parts[2]
            rest = ".".join(parts[4:])
            if kind == "upsamplers":
                has_attention = config["up_block_types"][level].startswith("CrossAttn")
                name = f"output_blocks.{level * per + per - 1}.{2 if has_attention else 1}.conv.{parts[-1]}"
            else:
                block = level * per + int(parts[3])
                name = (f"output_blocks.{block}.0.{_resnet(rest)}" if kind == "resnets"
                        else f"output_blocks.{block}.1.{rest}")
        else:
            raise KeyError(key)
        out["model.diffusion_model." + name] = value
    return out


VAE_ATTENTION = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}


def vae_to_original(state: dict[str, np.ndarray], config: dict, prefix: str = "first_stage_model.") -> dict:
    """An AutoencoderKL state dict in LDM names (attention projections as 1x1 convolutions)."""
    levels = len(config["block_out_channels"])
    out = {}
    for key, value in state.items():
        part, _, rest = key.partition(".")
        if part in ("quant_conv", "post_quant_conv"):
            out[prefix + key] = value
            continue
        bits = rest.split(".")
        if bits[0] in ("conv_in", "conv_out"):
            name = rest
        elif bits[0] == "conv_norm_out":
            name = "norm_out." + bits[1]
        elif bits[0] in ("down_blocks", "up_blocks"):
            level = int(bits[1]) if part == "encoder" else levels - 1 - int(bits[1])
            where = "down" if part == "encoder" else "up"
            if bits[2] in ("downsamplers", "upsamplers"):
                name = f"{where}.{level}.{where}sample.conv.{bits[-1]}"
            else:
                module = "nin_shortcut" if bits[4] == "conv_shortcut" else bits[4]
                name = f"{where}.{level}.block.{bits[3]}.{module}.{bits[-1]}"
        elif bits[0] == "mid_block" and bits[1] == "resnets":
            module = "nin_shortcut" if bits[3] == "conv_shortcut" else bits[3]
            name = f"mid.block_{int(bits[2]) + 1}.{module}.{bits[-1]}"
        elif bits[0] == "mid_block" and bits[1] == "attentions":
            module = ".".join(bits[3:-1])
            name = f"mid.attn_1.{VAE_ATTENTION[module]}.{bits[-1]}"
            if bits[-1] == "weight" and module != "group_norm":
                value = value.reshape(*value.shape, 1, 1)
        else:
            raise KeyError(key)
        out[f"{prefix}{part}.{name}"] = value
    return out


def clip_to_original(state: dict[str, np.ndarray], prefix: str, position_ids: bool = False) -> dict:
    """A transformers CLIPTextModel state dict under ``prefix`` with its ``text_model.`` level."""
    out = {}
    for key, value in state.items():
        inner = key if key.startswith("text_model.") else "text_model." + key
        out[prefix + inner] = value
    if position_ids:
        count = state[next(k for k in state if k.endswith("position_embedding.weight"))].shape[0]
        out[prefix + "text_model.embeddings.position_ids"] = np.arange(count, dtype=np.int64)[None]
    return out


OPEN_CLIP_PART = {"layer_norm1": "ln_1", "layer_norm2": "ln_2", "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj",
                  "self_attn.out_proj": "attn.out_proj"}


def open_clip_to_original(state: dict[str, np.ndarray], prefix: str, extra_layer: dict | None = None,
                          projection: np.ndarray | None = None) -> dict:
    """A CLIPTextModel(WithProjection) state dict as an OpenCLIP text tower: q/k/v stacked in
    ``in_proj``, ``text_projection`` as ``x @ P``. ``extra_layer`` (OpenCLIP names inside a resblock)
    is appended as one more resblock and ``projection`` stored as the tower's projection (SD 2.x
    files hold the full 24-layer tower and its projection; diffusers uses 23 layers and no projection)."""
    out = {}
    layers: dict[int, dict[str, np.ndarray]] = {}
    for key, value in state.items():
        inner = key[len("text_model."):] if key.startswith("text_model.") else key
        if inner == "embeddings.token_embedding.weight":
            out[prefix + "token_embedding.weight"] = value
        elif inner == "embeddings.position_embedding.weight":
            out[prefix + "positional_embedding"] = value
        elif inner.startswith("final_layer_norm."):
            out[prefix + "ln_final." + inner.rsplit(".", 1)[1]] = value
        elif key == "text_projection.weight":
            out[prefix + "text_projection"] = np.ascontiguousarray(value.T)
        elif inner.startswith("encoder.layers."):
            bits = inner.split(".")
            layers.setdefault(int(bits[2]), {})[".".join(bits[3:])] = value
        else:
            raise KeyError(key)
    for layer, parts in sorted(layers.items()):
        base = f"{prefix}transformer.resblocks.{layer}."
        for param in ("weight", "bias"):
            out[base + f"attn.in_proj_{param}"] = np.concatenate(
                [parts[f"self_attn.{p}.{param}"] for p in ("q_proj", "k_proj", "v_proj")])
        for name, value in parts.items():
            module, _, param = name.rpartition(".")
            if module in OPEN_CLIP_PART:
                out[base + f"{OPEN_CLIP_PART[module]}.{param}"] = value
    if extra_layer is not None:
        base = f"{prefix}transformer.resblocks.{len(layers)}."
        out.update({base + k: v for k, v in extra_layer.items()})
    if projection is not None:
        out[prefix + "text_projection"] = projection
    return out
