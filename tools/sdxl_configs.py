"""The configs of SDXL base 1.0 and SDXL-Turbo, as their Hugging Face repos publish them (full size).

Only sizes and switches: the weights are random. Used by tools/sdxl_full_export.py (the export) and
benchmarks/sdxl_memory.py (the Turbo folder dressed from the same components).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# stabilityai/stable-diffusion-xl-base-1.0 unet/config.json (2.57 B parameters).
UNET: dict[str, Any] = {
    "act_fn": "silu",
    "addition_embed_type": "text_time",
    "addition_embed_type_num_heads": 64,
    "addition_time_embed_dim": 256,
    "attention_head_dim": [5, 10, 20],
    "block_out_channels": [320, 640, 1280],
    "center_input_sample": False,
    "cross_attention_dim": 2048,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "downsample_padding": 1,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "layers_per_block": 2,
    "mid_block_scale_factor": 1,
    "norm_eps": 1e-05,
    "norm_num_groups": 32,
    "out_channels": 4,
    "projection_class_embeddings_input_dim": 2816,
    "sample_size": 128,
    "transformer_layers_per_block": [1, 2, 10],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "use_linear_projection": True,
}

# The SDXL VAE (same AutoencoderKL shape as SD's, its own scaling factor).
VAE: dict[str, Any] = {
    "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "force_upcast": True,
    "in_channels": 3,
    "latent_channels": 4,
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "out_channels": 3,
    "sample_size": 1024,
    "scaling_factor": 0.13025,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
}

# text_encoder: OpenAI CLIP ViT-L/14's text tower (as in SD 1.5 and SDXL).
CLIP_L: dict[str, Any] = {
    "vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
    "num_attention_heads": 12, "max_position_embeddings": 77, "hidden_act": "quick_gelu",
    "projection_dim": 768, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1,
}
# text_encoder_2: OpenCLIP ViT-bigG/14's text tower with its projection.
CLIP_BIGG: dict[str, Any] = {
    "vocab_size": 49408, "hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32,
    "num_attention_heads": 20, "max_position_embeddings": 77, "hidden_act": "gelu",
    "projection_dim": 1280, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1,
}

MODEL_INDEX: dict[str, Any] = {
    "_class_name": "StableDiffusionXLPipeline",
    "_diffusers_version": "0.42.1",
    "feature_extractor": [None, None],
    "force_zeros_for_empty_prompt": True,
    "image_encoder": [None, None],
    "scheduler": ["diffusers", "EulerDiscreteScheduler"],
    "text_encoder": ["transformers", "CLIPTextModel"],
    "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
    "tokenizer": ["transformers", "CLIPTokenizer"],
    "tokenizer_2": ["transformers", "CLIPTokenizer"],
    "unet": ["diffusers", "UNet2DConditionModel"],
    "vae": ["diffusers", "AutoencoderKL"],
}

_BETAS = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear",
          "num_train_timesteps": 1000, "clip_sample": False, "interpolation_type": "linear",
          "prediction_type": "epsilon", "sample_max_value": 1.0, "set_alpha_to_one": False,
          "skip_prk_steps": True, "steps_offset": 1, "trained_betas": None}
BASE_SCHEDULER: dict[str, Any] = {"_class_name": "EulerDiscreteScheduler", **_BETAS,
                                  "timestep_spacing": "leading", "use_karras_sigmas": False}
# stabilityai/sdxl-turbo: same UNet architecture, 512x512 native (unet sample_size 64), trailing spacing.
TURBO_SCHEDULER: dict[str, Any] = {"_class_name": "EulerAncestralDiscreteScheduler", **_BETAS,
                                   "timestep_spacing": "trailing"}
TURBO_UNET_OVERRIDES: dict[str, Any] = {"sample_size": 64}

UNET_AXES = {
    "sample": {0: "batch_size", 2: "height", 3: "width"},
    "timestep": {0: "steps"},
    "encoder_hidden_states": {0: "batch_size", 1: "sequence_length"},
    "text_embeds": {0: "batch_size"},
    "time_ids": {0: "batch_size"},
    "out_sample": {0: "batch_size", 2: "height", 3: "width"},
}
VAE_AXES = {"latent_sample": {0: "batch_size", 2: "height_latent", 3: "width_latent"},
            "sample": {0: "batch_size", 2: "height", 3: "width"}}


def unet_feeds(batch: int = 2, height: int = 8, width: int = 12) -> dict[str, np.ndarray]:
    """Seeded UNet inputs in optimum's order (a small latent: tracing and the check stay cheap)."""
    rng = np.random.default_rng(0)
    pooled = UNET["projection_class_embeddings_input_dim"] - 6 * UNET["addition_time_embed_dim"]
    size = [height * 8, width * 8]
    return {
        "sample": rng.standard_normal((batch, 4, height, width)).astype(np.float32),
        "timestep": np.array([501.0], dtype=np.float32),
        "encoder_hidden_states": rng.standard_normal((batch, 77, UNET["cross_attention_dim"])).astype(np.float32),
        "text_embeds": rng.standard_normal((batch, pooled)).astype(np.float32),
        "time_ids": np.tile(np.array(size + [0, 0] + size, np.float32), (batch, 1)),
    }


def vae_feeds() -> dict[str, np.ndarray]:
    return {"latent_sample": np.random.default_rng(0).standard_normal((1, 4, 6, 10)).astype(np.float32)}


def text_feeds(vocab_size: int) -> dict[str, np.ndarray]:
    """int32 ids (optimum casts to int32): BOS, random tokens, EOS padding from position 20."""
    ids = np.random.default_rng(0).integers(0, vocab_size - 2, (2, 77)).astype(np.int32)
    ids[:, 0], ids[:, 20:] = vocab_size - 2, vocab_size - 1
    return {"input_ids": ids}


def text_axes(outputs: list[str]) -> dict[str, dict[int, str]]:
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"}}
    axes.update({o: {0: "batch_size"} if o in ("pooler_output", "text_embeds")
                 else {0: "batch_size", 1: "sequence_length"} for o in outputs})
    return axes
