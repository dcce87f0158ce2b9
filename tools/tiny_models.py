"""Tiny, seeded, random-weight Stable Diffusion components (dev-only: needs torch, diffusers, transformers).

The fixture builders in this folder share these constructors so that the engine fixtures, the demo
model and the pipeline fixtures all exercise the same real diffusers / transformers classes that
full-size SD 1.5 and SDXL checkpoints use, just with small widths. Weights come from the classes' own
initialisers after ``torch.manual_seed(seed)``, so every build is bit-for-bit repeatable on one
torch version.
"""

from __future__ import annotations

from typing import Any

import torch

# SD 1.5-like: a CrossAttn level and a plain level, the mid block with cross-attention.
SD15_UNET: dict[str, Any] = {
    "sample_size": 8,
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": (8, 16),
    "layers_per_block": 1,
    "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
    "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"),
    "cross_attention_dim": 16,
    "attention_head_dim": 2,  # diffusers' legacy name: this is the number of heads
    "norm_num_groups": 4,
}

# SDXL-like: text_time added conditioning, linear projections, two transformer layers at the
# deepest level (SDXL uses transformer_layers_per_block=(1, 2, 10)).
SDXL_UNET: dict[str, Any] = {
    "sample_size": 8,
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": (8, 16),
    "layers_per_block": 1,
    "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"),
    "up_block_types": ("CrossAttnUpBlock2D", "UpBlock2D"),
    "transformer_layers_per_block": (1, 2),
    "cross_attention_dim": 24,
    "attention_head_dim": (2, 4),
    "norm_num_groups": 4,
    "use_linear_projection": True,
    "addition_embed_type": "text_time",
    "addition_time_embed_dim": 4,
    # text_embeds width (pooled projection of text encoder 2) + 6 time ids * addition_time_embed_dim
    "projection_class_embeddings_input_dim": 8 + 6 * 4,
}

# AutoencoderKL with SD's shape contract: 4 latent channels, 3 up-samplings (8x).
VAE: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": (4, 8, 8, 8),
    "layers_per_block": 1,
    "down_block_types": ("DownEncoderBlock2D",) * 4,
    "up_block_types": ("UpDecoderBlock2D",) * 4,
    "norm_num_groups": 4,
    "sample_size": 64,
    "scaling_factor": 0.18215,
}

CLIP_TEXT: dict[str, Any] = {
    "vocab_size": 1000,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "max_position_embeddings": 77,
    "projection_dim": 8,
    "hidden_act": "quick_gelu",
    "bos_token_id": 998,
    "eos_token_id": 999,
    "pad_token_id": 1,
}


def merged(base: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Return a copy of ``base`` updated with ``overrides`` (configs are never mutated in place)."""
    out = dict(base)
    out.update(overrides or {})
    return out


def unet(seed: int, config: dict[str, Any]) -> torch.nn.Module:
    """A ``UNet2DConditionModel`` in eval mode with seeded random weights."""
    from diffusers import UNet2DConditionModel

    torch.manual_seed(seed)
    return UNet2DConditionModel(**config).eval()


def vae(seed: int, config: dict[str, Any]) -> torch.nn.Module:
    """An ``AutoencoderKL`` in eval mode with seeded random weights."""
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    return AutoencoderKL(**config).eval()


def clip_text(seed: int, config: dict[str, Any], with_projection: bool = False) -> torch.nn.Module:
    """A ``CLIPTextModel`` (or ``CLIPTextModelWithProjection``) with eager attention.

    Eager attention keeps the traced graph to plain MatMul/Softmax, like the published SD exports.
    """
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(seed)
    cfg = CLIPTextConfig(**config)
    cfg._attn_implementation = "eager"
    cls = CLIPTextModelWithProjection if with_projection else CLIPTextModel
    return cls(cfg).eval()


class UNetWrapper(torch.nn.Module):
    """Positional-argument UNet forward with optimum's input names; returns ``out_sample``."""

    def __init__(self, model: torch.nn.Module, text_time: bool) -> None:
        super().__init__()
        self.model = model
        self.text_time = text_time

    def forward(self, sample, timestep, encoder_hidden_states, text_embeds=None, time_ids=None):
        added = {"text_embeds": text_embeds, "time_ids": time_ids} if self.text_time else None
        return self.model(
            sample, timestep, encoder_hidden_states, added_cond_kwargs=added, return_dict=False
        )[0]


class VaeDecoderWrapper(torch.nn.Module):
    """``vae.decode(z).sample``: post_quant_conv + decoder, as optimum's vae_decoder export."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, latent_sample):
        return self.model.decode(latent_sample, return_dict=False)[0]


# How exporters write vae_encoder/model.onnx (input ``sample``), by style: the output name and what it is.
VAE_ENCODER_STYLES = {
    # diffusers' convert_stable_diffusion_checkpoint_to_onnx.py and optimum < 1.23: latent_dist.sample()
    # traced, so the graph draws its own noise (ConstantOfShape -> RandomNormalLike -> mean + std * noise)
    "sampled": "latent_sample",
    # optimum >= 1.23: latent_dist.parameters (mean and logvar stacked, 2 x 4 channels); the runtime samples
    "parameters": "latent_parameters",
    # some hand-written exports: latent_dist.mode(), the mean (deterministic)
    "mean": "latent_sample",
}


class VaeEncoderWrapper(torch.nn.Module):
    """``vae.encode(x).latent_dist`` as one of the exporters' styles (:data:`VAE_ENCODER_STYLES`)."""

    def __init__(self, model: torch.nn.Module, style: str = "sampled") -> None:
        super().__init__()
        if style not in VAE_ENCODER_STYLES:
            raise ValueError(f"unknown vae_encoder style {style!r}")
        self.model = model
        self.style = style

    def forward(self, sample):
        dist = self.model.encode(sample, return_dict=False)[0]
        if self.style == "sampled":
            return dist.sample()
        return dist.parameters if self.style == "parameters" else dist.mode()


class ClipTextWrapper(torch.nn.Module):
    """CLIP text encoder returning outputs in optimum's order.

    CLIPTextModel: last_hidden_state, pooler_output. CLIPTextModelWithProjection: text_embeds,
    last_hidden_state. With ``hidden_states=True`` the per-layer hidden_states.0..N follow.
    """

    def __init__(self, model: torch.nn.Module, hidden_states: bool) -> None:
        super().__init__()
        self.model = model
        self.hidden_states = hidden_states

    def forward(self, input_ids):
        out = self.model(input_ids=input_ids, output_hidden_states=self.hidden_states)
        if hasattr(out, "text_embeds"):
            first = (out.text_embeds, out.last_hidden_state)
        else:
            first = (out.last_hidden_state, out.pooler_output)
        return (*first, *out.hidden_states) if self.hidden_states else first

    def output_names(self) -> list[str]:
        """The ONNX output names matching ``forward``'s tuple."""
        proj = type(self.model).__name__ == "CLIPTextModelWithProjection"
        names = ["text_embeds", "last_hidden_state"] if proj else ["last_hidden_state", "pooler_output"]
        if self.hidden_states:
            names += [f"hidden_states.{i}" for i in range(self.model.config.num_hidden_layers + 1)]
        return names
