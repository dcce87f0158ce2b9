"""Full-size key/shape manifests of SD 1.5, SD 2.1 (768, v) and SDXL base single-file checkpoints.

Dev-only (torch, diffusers, transformers). The models are built on torch's ``meta`` device from the
configs their Hugging Face repositories publish (no weights, no memory), their state dicts written in
the original layout (tools/checkpoint_layout.py) as ``{key: [dtype, shape]}``, and stored with the
configs and the diffusers state-dict shapes they must map back to:
``tests/fixtures/checkpoints/manifests/<kind>.json.gz``. Tests check frame's detection, key mapping and
derived configs on them at full size without any tensor data, and ``benchmarks/model_import.py``
fills one with random numbers to time a real-size import.

    /work/main/.venv/bin/python tools/checkpoint_manifests.py [--out tests/fixtures/checkpoints/manifests]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import checkpoint_layout as layout  # noqa: E402
import sdxl_configs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
_UNET_COMMON = {"act_fn": "silu", "center_input_sample": False, "downsample_padding": 1, "flip_sin_to_cos": True,
                "freq_shift": 0, "in_channels": 4, "layers_per_block": 2, "mid_block_scale_factor": 1,
                "norm_eps": 1e-05, "norm_num_groups": 32, "out_channels": 4,
                "block_out_channels": [320, 640, 1280, 1280],
                "down_block_types": ["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
                "up_block_types": ["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3}
# runwayml/stable-diffusion-v1-5 and stabilityai/stable-diffusion-2-1, unet/config.json
SD15_UNET = {**_UNET_COMMON, "attention_head_dim": 8, "cross_attention_dim": 768, "sample_size": 64}
SD21_UNET = {**_UNET_COMMON, "attention_head_dim": [5, 10, 20, 20], "cross_attention_dim": 1024, "sample_size": 96,
             "use_linear_projection": True, "upcast_attention": True}
SD_VAE = {**sdxl_configs.VAE, "scaling_factor": 0.18215, "sample_size": 512, "force_upcast": True}
# stabilityai/stable-diffusion-2-1 text_encoder/config.json (OpenCLIP ViT-H/14, penultimate layer: 23 of 24)
OPEN_CLIP_H = {**sdxl_configs.CLIP_L, "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 23,
               "num_attention_heads": 16, "hidden_act": "gelu", "projection_dim": 512}
KINDS = {
    "sd15": {"unet": SD15_UNET, "vae": SD_VAE, "text_encoder": sdxl_configs.CLIP_L},
    "sd21": {"unet": SD21_UNET, "vae": {**SD_VAE, "sample_size": 768}, "text_encoder": OPEN_CLIP_H},
    "sdxl": {"unet": sdxl_configs.UNET, "vae": sdxl_configs.VAE, "text_encoder": sdxl_configs.CLIP_L,
             "text_encoder_2": sdxl_configs.CLIP_BIGG},
}


def shapes_only(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """The state dict as zero-stride float32 arrays of the right shapes (no memory)."""
    return {k: np.broadcast_to(np.float32(0), tuple(v.shape)) for k, v in module.state_dict().items()
            if not k.endswith("position_ids")}


def build(kind: str) -> dict:
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    configs = KINDS[kind]
    with torch.device("meta"):
        unet = UNet2DConditionModel(**configs["unet"])
        vae = AutoencoderKL(**configs["vae"])
        texts = {name: (CLIPTextModelWithProjection if name == "text_encoder_2" else CLIPTextModel)(
            CLIPTextConfig(**configs[name])) for name in configs if name.startswith("text_encoder")}
    states = {"unet": shapes_only(unet), "vae": shapes_only(vae)} | {n: shapes_only(m) for n, m in texts.items()}
    original = layout.unet_to_original(states["unet"], unet.config)
    original.update(layout.vae_to_original(states["vae"], vae.config))
    text = states["text_encoder"]
    if kind == "sd15":
        original.update(layout.clip_to_original(text, "cond_stage_model.transformer.", position_ids=True))
    elif kind == "sd21":
        last = {k.split(".", 5)[5]: v for k, v in layout.open_clip_to_original(
            text, "cond_stage_model.model.").items() if ".resblocks.22." in k}
        original.update(layout.open_clip_to_original(text, "cond_stage_model.model.", extra_layer=last,
                                                     projection=np.broadcast_to(np.float32(0), (1024, 1024))))
    else:
        original.update(layout.clip_to_original(text, "conditioner.embedders.0.transformer."))
        original.update(layout.open_clip_to_original(states["text_encoder_2"], "conditioner.embedders.1.model."))
    canonical = {name: {k if name in ("unet", "vae") or k.startswith(("text_model.", "text_projection"))
                        else "text_model." + k: list(v.shape) for k, v in state.items()}
                 for name, state in states.items()}
    return {"tensors": {k: ["I64" if v.dtype == np.int64 else "F16", list(v.shape)] for k, v in original.items()},
            "configs": {name: dict(configs[name]) for name in configs}, "shapes": canonical}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "checkpoints" / "manifests")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        path = args.out / f"{kind}.json.gz"
        with gzip.GzipFile(path, "wb", mtime=0) as file:
            file.write(json.dumps(build(kind), sort_keys=True).encode())
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
