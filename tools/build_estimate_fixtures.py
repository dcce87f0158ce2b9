"""Reference multiply-add counts for ``frame.estimate``: torch's own FLOP counter on the real models.

Dev-only (torch, diffusers, transformers). For the engine fixtures (tiny SD 1.5 / SDXL UNets, VAE
decoder, CLIP) it rebuilds each fixture's torch module (``engine_components``, same seed and config)
and runs it on the fixture's ``inputs.npz`` under ``torch.utils.flop_counter.FlopCounterMode``; for
the full-size architectures (SD 1.5 and SDXL UNets, the SD VAE decoder at one 32×32 tile, CLIP ViT-L)
it builds the modules on torch's ``meta`` device (no weights, no memory) and counts them at night
sizes. FLOPs / 2 = multiply-adds of the convs and matrix products, which is what ``frame estimate``
counts from the ONNX graphs. Output: ``tests/fixtures/estimate/torch_macs.json``.

    /work/wt/<branch>/.venv/bin/python tools/build_estimate_fixtures.py [--out tests/fixtures/estimate]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_components as ec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEED = 1234  # build_engine_fixtures.SEED
FIXTURES = {  # fixture name -> component builder
    "unet_sd15_ts14_dynamic": lambda: ec.unet_component(SEED, sdxl=False, timestep="float32_1d"),
    "unet_sdxl_ts17_dynamic": lambda: ec.unet_component(SEED, sdxl=True, timestep="float32_1d"),
    "vae_decoder_ts14_dynamic": lambda: ec.vae_decoder_component(SEED),
    "clip_text_ts14_dynamic": lambda: ec.clip_component(SEED, False, False, "int32"),
}
SD15_UNET = {"sample_size": 64, "cross_attention_dim": 768, "attention_head_dim": 8,
             "block_out_channels": (320, 640, 1280, 1280)}
SDXL_UNET = {"sample_size": 128, "cross_attention_dim": 2048, "attention_head_dim": (5, 10, 20),
             "block_out_channels": (320, 640, 1280), "transformer_layers_per_block": (1, 2, 10),
             "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
             "up_block_types": ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
             "use_linear_projection": True, "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
             "projection_class_embeddings_input_dim": 2816}
SD_VAE = {"block_out_channels": (128, 256, 512, 512), "latent_channels": 4, "layers_per_block": 2,
          "down_block_types": ("DownEncoderBlock2D",) * 4, "up_block_types": ("UpDecoderBlock2D",) * 4}


def macs(module, *args, **kwargs) -> int:  # noqa: ANN001 - a module or a bound method
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        module(*args, **kwargs)
    return int(counter.get_total_flops() // 2)


def fixture_macs(name: str) -> int:
    """On the meta device, like the full-size counts: CPU tensors would run attention through a fused
    kernel the FLOP counter does not see."""
    comp = FIXTURES[name]()
    feeds = dict(np.load(REPO / "tests" / "fixtures" / "engine" / name / "inputs.npz"))
    inputs = [torch.from_numpy(feeds[n]).to("meta") for n in comp.input_names]
    return macs(comp.module.eval().to("meta"), *inputs)


def full_size_unet(sdxl: bool, latent: int, batch: int) -> int:
    from diffusers import UNet2DConditionModel

    with torch.device("meta"):
        model = UNet2DConditionModel(**(SDXL_UNET if sdxl else SD15_UNET)).eval()
        sample = torch.empty(batch, 4, latent, latent)
        hidden = torch.empty(batch, 77, 2048 if sdxl else 768)
        extra = {"added_cond_kwargs": {"text_embeds": torch.empty(batch, 1280), "time_ids": torch.empty(batch, 6)}} \
            if sdxl else {}
        return macs(model, sample, torch.tensor([500.0]), hidden, **extra)


def full_size_vae(latent: int) -> int:
    from diffusers import AutoencoderKL

    with torch.device("meta"):
        model = AutoencoderKL(**SD_VAE).eval()
        return macs(model.decode, torch.empty(1, 4, latent, latent))  # post_quant_conv included


def full_size_clip() -> int:
    from transformers import CLIPTextConfig, CLIPTextModel

    with torch.device("meta"):
        model = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                             num_attention_heads=12, max_position_embeddings=77)).eval()
        return macs(model, torch.zeros(1, 77, dtype=torch.long))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "estimate")
    args = parser.parse_args(argv)
    result = {"torch": torch.__version__, "fixtures": {name: fixture_macs(name) for name in FIXTURES},
              "full_size": {
                  "sd15_unet_64x64_batch1": full_size_unet(False, 64, 1),
                  "sd15_unet_64x64_batch2": full_size_unet(False, 64, 2),
                  "sdxl_unet_64x64_batch1": full_size_unet(True, 64, 1),
                  "sdxl_unet_128x128_batch1": full_size_unet(True, 128, 1),
                  "sd_vae_decoder_32x32": full_size_vae(32),
                  "clip_vit_l_text_77": full_size_clip(),
              }}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "torch_macs.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
