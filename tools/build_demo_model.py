"""Build the bundled demo model (frame/models/demo): a tiny random-weight SD 1.5-architecture pipeline.

Dev-only (torch, diffusers, transformers, onnxruntime). Real diffusers/transformers classes with
small configs and seeded random weights, exported to the folder layout ``optimum-cli export onnx``
writes, with the real 49408-token CLIP BPE vocabulary. It paints abstract noise; its purpose is to
let every frame command run offline with the same code path a real SD 1.5 export takes.

    /work/venv/bin/python tools/build_demo_model.py [--out frame/models/demo] [--wheel-cache DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import clip_vocab  # noqa: E402
import diffusers_export as dx  # noqa: E402
import onnx_export as ox  # noqa: E402
import tiny_models as tm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from frame.models import DEFAULT_STEPS_KEY, DEMO_DEFAULT_STEPS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEED = 20240501

TEXT = {
    "vocab_size": 49408, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 2, "max_position_embeddings": 77, "projection_dim": 32,
    "hidden_act": "quick_gelu", "bos_token_id": 49406, "eos_token_id": 49407, "pad_token_id": 49407,
}
UNET = tm.merged(tm.SD15_UNET, {
    "sample_size": 64, "block_out_channels": (16, 32), "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"),
    "up_block_types": ("CrossAttnUpBlock2D", "UpBlock2D"), "cross_attention_dim": 32,
    "attention_head_dim": 4, "norm_num_groups": 8,
})
VAE = tm.merged(tm.VAE, {"block_out_channels": (8, 16, 32, 32), "norm_num_groups": 8, "sample_size": 512})
# Stable Diffusion 1.5's scheduler/scheduler_config.json values.
SCHEDULER = {
    "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "num_train_timesteps": 1000,
    "set_alpha_to_one": False, "skip_prk_steps": True, "steps_offset": 1,
}
SCHEDULER_EXTRA = {"clip_sample": False}  # in SD 1.5's file; PNDMScheduler itself does not take it
FP16_MIN_ELEMENTS = 100_000  # only the 49408 x 32 token embedding is stored as fp16 (+ Cast)


def build_pipeline(vocab: dict[str, int], merges: list[str]):
    """The torch StableDiffusionPipeline with seeded tiny components."""
    from diffusers import PNDMScheduler, StableDiffusionPipeline
    from transformers import CLIPTokenizer

    tokenizer = CLIPTokenizer(vocab=vocab, merges=[tuple(m.split()) for m in merges], model_max_length=77)
    return StableDiffusionPipeline(
        vae=tm.vae(SEED + 1, VAE),
        text_encoder=tm.clip_text(SEED + 2, TEXT),
        tokenizer=tokenizer,
        unet=tm.unet(SEED + 3, UNET),
        scheduler=PNDMScheduler(**SCHEDULER),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )


def time_components(out: Path) -> None:
    """Print onnxruntime's time for one CFG UNet call and one VAE decode at 512x320 (latent 40x64)."""
    rng = np.random.default_rng(0)
    unet_feeds = {
        "sample": rng.standard_normal((2, 4, 40, 64)).astype(np.float32),
        "timestep": np.array([500.0], np.float32),
        "encoder_hidden_states": rng.standard_normal((2, 77, 32)).astype(np.float32),
    }
    for name, feeds in (("unet", unet_feeds),
                        ("vae_decoder", {"latent_sample": unet_feeds["sample"][:1]})):
        start = time.perf_counter()
        result = ox.run_ort(out / name / "model.onnx", feeds)
        shape = next(iter(result.values())).shape
        print(f"  onnxruntime {name} at latent 40x64: {time.perf_counter() - start:.2f} s -> {shape}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "frame" / "models" / "demo")
    parser.add_argument("--wheel-cache", type=Path, default=Path("/work/cache/wheels"),
                        help="where the open-clip-torch wheel (CLIP BPE file) is cached")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    vocab, merges = clip_vocab.build_vocab(clip_vocab.fetch_bpe(args.wheel_cache))
    readme = args.out / "README.md"
    kept = readme.read_text() if readme.exists() else None
    if args.out.exists():
        shutil.rmtree(args.out)
    pipe = build_pipeline(vocab, merges)
    report = dx.export_pipeline(pipe, args.out, {"tokenizer": (vocab, merges, clip_vocab.EOS)},
                                fp16_min=FP16_MIN_ELEMENTS, vae_encoder="sampled",
                                scheduler_extra=SCHEDULER_EXTRA)
    if kept is not None:
        readme.write_text(kept)
    index_path = args.out / "model_index.json"  # the model's own default steps travel with it (frame.models)
    index = json.loads(index_path.read_text())
    index[DEFAULT_STEPS_KEY] = DEMO_DEFAULT_STEPS
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=2) + "\n")
    clip_vocab.verify_tokenizer(args.out / "tokenizer", 49408)
    for f in sorted(set(report.files)):
        print(f"wrote {f.relative_to(args.out)}: {f.stat().st_size / 1024:.0f} KiB")
    print("onnxruntime vs torch:\n" + report.summary())
    time_components(args.out)
    print(f"total size of {args.out}: {dx.folder_size(args.out) / 1024 / 1024:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
