"""Build tiny single-file checkpoints (SD 1.5, SD 2.x v-prediction, SDXL) in the original key layout.

Dev-only (torch, diffusers, transformers, safetensors). For each kind: a tiny diffusers pipeline with
seeded random weights (rounded to the file's dtype first, so the file holds them exactly), written as
one ``.safetensors`` in the layout A1111/civitai files have (tools/checkpoint_layout.py), then loaded
back with diffusers' own ``from_single_file(..., config=<the tiny folder>)``, which must reproduce
every original weight exactly. Output in ``tests/fixtures/checkpoints/``:

* ``<kind>.safetensors``: the checkpoint (SD 1.5 in float16 with its training buffers and CLIP's
  ``position_ids``; SD 2.x in bfloat16 with OpenCLIP's full 24-layer tower, its projection and
  ``logit_scale``; SDXL in float16);
* ``<kind>/``: the tiny folder's config.json files, scheduler and tokenizer(s), what ``frame model
  import --config`` takes for widths a checkpoint cannot tell (heads, GroupNorm groups);
* ``<kind>/expected.json``: per component, every diffusers/transformers key with its shape and the
  SHA-256 of its float32 bytes, as diffusers loads them;
* ``<kind>/reference.npz``: diffusers' picture (uint8) from that pipeline and a seed alone
  (``RENDER``), which frame's import + render must match (tests/convert/checkpoint/test_end_to_end.py).

    /work/main/.venv/bin/python tools/build_checkpoint_fixtures.py [--out tests/fixtures/checkpoints]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import checkpoint_layout as layout  # noqa: E402
import clip_vocab  # noqa: E402
import tiny_models as tm  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEED = 4100
NUM_MERGES = 486  # 512 byte symbols + 486 merges + 2 specials = a 1000-token vocabulary
BETAS = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "num_train_timesteps": 1000,
         "steps_offset": 1}
TEXT = tm.merged(tm.CLIP_TEXT, {"vocab_size": 1000, "bos_token_id": 998, "eos_token_id": 999, "pad_token_id": 999})
KINDS = {
    "sd15": {"unet": tm.merged(tm.SD15_UNET, {"cross_attention_dim": 16}), "vae": tm.VAE,
             "text": [TEXT], "dtype": torch.float16,
             "scheduler": ("DDIMScheduler", {"set_alpha_to_one": False, "clip_sample": False}),
             "pipeline": "StableDiffusionPipeline"},
    "sd2v": {"unet": tm.merged(tm.SD15_UNET, {"cross_attention_dim": 16, "use_linear_projection": True,
                                              "attention_head_dim": (2, 4), "sample_size": 12}),
             "vae": tm.merged(tm.VAE, {"sample_size": 96}),
             "text": [tm.merged(TEXT, {"hidden_act": "gelu", "num_hidden_layers": 23, "pad_token_id": 0})],
             "dtype": torch.bfloat16,
             "scheduler": ("DDIMScheduler", {"set_alpha_to_one": False, "clip_sample": False,
                                             "prediction_type": "v_prediction"}),
             "pipeline": "StableDiffusionPipeline"},
    "sdxl": {"unet": tm.merged(tm.SDXL_UNET, {"cross_attention_dim": 16 + 24, "sample_size": 16,
                                              "projection_class_embeddings_input_dim": 8 + 6 * 4}),
             "vae": tm.merged(tm.VAE, {"scaling_factor": 0.13025, "sample_size": 128}),
             "text": [tm.merged(TEXT, {"hidden_size": 16, "intermediate_size": 32}),
                      tm.merged(TEXT, {"hidden_size": 24, "intermediate_size": 48, "num_hidden_layers": 3,
                                       "projection_dim": 8, "hidden_act": "gelu", "pad_token_id": 0})],
             "dtype": torch.float16, "scheduler": ("EulerDiscreteScheduler", {"timestep_spacing": "leading"}),
             "pipeline": "StableDiffusionXLPipeline"},
}


def rounded(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """Weights rounded to ``dtype`` and back, so a file in ``dtype`` holds them exactly."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.to(dtype).to(torch.float32))
    return module


def numpy_state(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().to(torch.float32).numpy().copy() for k, v in module.state_dict().items()
            if not k.endswith("position_ids")}


def canonical_text(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers >= 5.6 flattens CLIPTextModel's keys; the published files keep ``text_model.``."""
    return {k if k.startswith(("text_model.", "text_projection")) else "text_model." + k: v for k, v in state.items()}


def build(kind: str, spec: dict, vocab, merges):
    import diffusers

    seed = SEED + 100 * list(KINDS).index(kind)
    unet = rounded(tm.unet(seed, spec["unet"]), spec["dtype"])
    vae = rounded(tm.vae(seed + 1, spec["vae"]), spec["dtype"])
    texts = [rounded(tm.clip_text(seed + 2 + i, cfg, with_projection=i == 1), spec["dtype"])
             for i, cfg in enumerate(spec["text"])]
    cls_name, extra = spec["scheduler"]
    scheduler = getattr(diffusers, cls_name)(**BETAS, **extra)
    tokenizer = _tokenizer(vocab, merges, clip_vocab.EOS if kind == "sd15" else "!")
    parts = {"unet": unet, "vae": vae, "scheduler": scheduler, "text_encoder": texts[0], "tokenizer": tokenizer}
    if kind == "sdxl":
        parts.update(tokenizer=_tokenizer(vocab, merges, clip_vocab.EOS), text_encoder_2=texts[1],
                     tokenizer_2=tokenizer)
        pipe = diffusers.StableDiffusionXLPipeline(**parts, force_zeros_for_empty_prompt=True, add_watermarker=False)
    else:
        pipe = diffusers.StableDiffusionPipeline(**parts, safety_checker=None, feature_extractor=None,
                                                 requires_safety_checker=False)
    return pipe


def _tokenizer(vocab, merges, pad):
    from transformers import CLIPTokenizer

    return CLIPTokenizer(vocab=vocab, merges=[tuple(m.split()) for m in merges], pad_token=pad, model_max_length=77)


def original_layout(kind: str, pipe, generator: torch.Generator) -> dict[str, np.ndarray]:
    """The whole pipeline as one checkpoint's tensors (float32 values; the dtype is chosen on save)."""
    out = layout.unet_to_original(numpy_state(pipe.unet), pipe.unet.config)
    out.update(layout.vae_to_original(numpy_state(pipe.vae), pipe.vae.config))
    text = numpy_state(pipe.text_encoder)
    if kind == "sd15":
        out.update(layout.clip_to_original(text, "cond_stage_model.transformer.", position_ids=True))
        out["alphas_cumprod"] = np.cumprod(1 - np.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000) ** 2).astype(np.float32)
    elif kind == "sd2v":
        width, inner = pipe.text_encoder.config.hidden_size, pipe.text_encoder.config.intermediate_size

        def rand(*shape):
            return torch.randn(*shape, generator=generator).numpy() * 0.02

        extra = {"ln_1.weight": rand(width) + 1, "ln_1.bias": rand(width), "ln_2.weight": rand(width) + 1,
                 "ln_2.bias": rand(width), "attn.in_proj_weight": rand(3 * width, width),
                 "attn.in_proj_bias": rand(3 * width), "attn.out_proj.weight": rand(width, width),
                 "attn.out_proj.bias": rand(width), "mlp.c_fc.weight": rand(inner, width),
                 "mlp.c_fc.bias": rand(inner), "mlp.c_proj.weight": rand(width, inner), "mlp.c_proj.bias": rand(width)}
        out.update(layout.open_clip_to_original(text, "cond_stage_model.model.", extra_layer=extra,
                                                projection=rand(width, width)))
        out["cond_stage_model.model.logit_scale"] = np.array(4.6052, dtype=np.float32)
    else:
        out.update(layout.clip_to_original(text, "conditioner.embedders.0.transformer."))
        out.update(layout.open_clip_to_original(numpy_state(pipe.text_encoder_2), "conditioner.embedders.1.model."))
    return out


def save(tensors: dict[str, np.ndarray], path: Path, dtype: torch.dtype) -> None:
    from safetensors.torch import save_file

    stored = {k: torch.from_numpy(np.ascontiguousarray(v)) if v.dtype == np.int64
              else torch.from_numpy(np.ascontiguousarray(v)).to(dtype) for k, v in tensors.items()}
    save_file(stored, str(path))


RENDER = {"prompt": "a lighthouse on a cliff at dusk, oil painting", "negative_prompt": "blurry, low quality",
          "steps": 4, "guidance": 5.0, "seed": 1234, "width": 64, "height": 64}
SAMPLER = {"sd15": "ddim", "sd2v": "ddim", "sdxl": "euler"}


def reference_render(kind: str, loaded) -> dict[str, np.ndarray]:
    """diffusers' picture from the seed alone (torch's CPU generator draws the latents, as frame's
    ``model.noise: torch-cpu`` does), with the pipeline ``from_single_file`` made."""
    out = loaded(prompt=RENDER["prompt"], negative_prompt=RENDER["negative_prompt"],
                 num_inference_steps=RENDER["steps"], guidance_scale=RENDER["guidance"], width=RENDER["width"],
                 height=RENDER["height"], generator=torch.Generator().manual_seed(RENDER["seed"]), output_type="np")
    image = np.clip(np.round(out.images[0] * 255), 0, 255).astype(np.uint8)
    settings = {**RENDER, "sampler": SAMPLER[kind]}
    print(f"{kind}: reference render, pixel std {image.std():.1f}")
    return {"image": image, "settings": np.array(json.dumps(settings))}


def verify(kind: str, pipe, path: Path, folder: Path):
    """diffusers' own loader on the file must give back every weight of ``pipe`` exactly; returns
    the loaded pipeline."""
    import diffusers

    cls = getattr(diffusers, KINDS[kind]["pipeline"])
    loaded = cls.from_single_file(str(path), config=str(folder), local_files_only=True, torch_dtype=torch.float32)
    names = ["unet", "vae", "text_encoder"] + (["text_encoder_2"] if kind == "sdxl" else [])
    for name in names:
        want, got = numpy_state(getattr(pipe, name)), numpy_state(getattr(loaded, name))
        if set(want) != set(got):
            raise SystemExit(f"{kind}/{name}: diffusers loaded other keys: {sorted(set(want) ^ set(got))[:5]}")
        for key, value in want.items():
            if not np.array_equal(value, got[key]):
                raise SystemExit(f"{kind}/{name}: {key} differs after from_single_file")
    print(f"{kind}: diffusers from_single_file reproduces all {len(names)} components exactly")
    return loaded


def expected(pipe, names: list[str]) -> dict:
    out = {}
    for name in names:
        state = numpy_state(getattr(pipe, name))
        if name.startswith("text_encoder"):
            state = canonical_text(state)
        out[name] = {k: [list(v.shape), hashlib.sha256(np.ascontiguousarray(v, np.float32).tobytes()).hexdigest()]
                     for k, v in sorted(state.items())}
    return out


def write_folder(kind: str, folder: Path, final: Path, vocab, merges) -> None:
    """The tiny folder without weights: configs, scheduler, tokenizers as vocab.json + merges.txt
    (what --config reads; frame's tokenizer reads those two, not tokenizer.json)."""
    if final.exists():
        shutil.rmtree(final)
    for config in sorted(folder.rglob("*.json")):
        if config.parent.name.startswith("tokenizer"):
            continue
        target = final / config.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(config, target)
    pads = {"tokenizer": clip_vocab.EOS if kind in ("sd15", "sdxl") else "!", "tokenizer_2": "!"}
    for name in ("tokenizer", "tokenizer_2") if kind == "sdxl" else ("tokenizer",):
        clip_vocab.write_tokenizer(final / name, vocab, merges, pads[name])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "checkpoints")
    args = parser.parse_args()
    merge_lines = (REPO / "frame" / "models" / "demo" / "tokenizer" / "merges.txt").read_text().split("\n")[1:]
    vocab, merges = clip_vocab.build_vocab(merge_lines, NUM_MERGES)
    assert len(vocab) == TEXT["vocab_size"], len(vocab)
    args.out.mkdir(parents=True, exist_ok=True)
    for kind, spec in KINDS.items():
        pipe = build(kind, spec, vocab, merges)
        names = ["unet", "vae", "text_encoder"] + (["text_encoder_2"] if kind == "sdxl" else [])
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / kind
            pipe.save_pretrained(str(folder))
            path = args.out / f"{kind}.safetensors"
            save(original_layout(kind, pipe, torch.Generator().manual_seed(SEED)), path, spec["dtype"])
            loaded = verify(kind, pipe, path, folder)
            write_folder(kind, folder, args.out / kind, vocab, merges)
            np.savez_compressed(args.out / kind / "reference.npz", **reference_render(kind, loaded))
        (args.out / kind / "expected.json").write_text(json.dumps(expected(pipe, names), indent=0) + "\n")
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB) and {args.out / kind}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
