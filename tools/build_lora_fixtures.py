"""Build the LoRA fixtures: random-weight LoRAs made with peft for the tiny SD 1.5 / SDXL pipelines,
saved in kohya's keys by diffusers' own converter (and one in diffusers' PEFT layout), with the
images diffusers renders with them (``load_lora_weights`` + ``set_adapters``), so frame's streamed
LoRA is checked against diffusers in CI without torch (tests/diffusion/test_lora_pipeline.py).

dev-only (torch 2.13.0, diffusers 0.42.1, transformers 5.24.0, peft 0.21.2; diffusers 0.42 needs accelerate
to load peft adapters):

    PYTHONPATH=$PWD /work/main/.venv/bin/python tools/build_lora_fixtures.py    # ~1 min on 2 cores

The torch pipelines are rebuilt with tools/build_pipeline_fixtures.py's seeded builders (tokenizer
read from the committed fixture), and checked to reproduce its ``euler`` reference before any LoRA
is added. Output: tests/fixtures/pipelines/<kind>/loras/*.safetensors and
tests/fixtures/pipelines/<kind>/lora_references/<case>.npz + lora_cases.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_pipeline_fixtures as bpf  # noqa: E402
import pipeline_cases as pc  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "pipelines"
UNET_A = ["to_q", "to_k", "to_v", "to_out.0", "proj_in", "proj_out", "ff.net.0.proj", "ff.net.2", "conv1", "conv2"]
UNET_B = ["to_k", "to_v", "time_emb_proj", "conv_shortcut", "conv"]  # Gemm and more convs (LoCon)
TEXT_A = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]
TEXT_B: list[str] = []  # diffusers 0.42 + transformers 5 load a second kohya LoRA's text-encoder keys as
# "self_attn.to_q_lora" (UNEXPECTED, ignored): its reference would lack them, so "wood" changes the UNet only
# (name, unet targets, text targets, rank, alpha, factor std, saved as)
# "reed" is written by diffusers' own save_lora_weights, which keeps alpha (8, twice the rank) only in
# the header's lora_adapter_metadata, as flat keys ("unet.lora_alpha": 8, "unet.r": 4; issue 40 item 9)
LORAS = [("ink", UNET_A, TEXT_A, 4, 4.0, 0.35, "kohya"),
         ("wood", UNET_B, TEXT_B, 2, 2.0, 0.35, "kohya"),
         ("water", ["to_q", "to_out.0", "ff.net.2"], ["q_proj"], 3, 3.0, 0.4, "peft"),
         ("reed", ["to_q", "to_v", "ff.net.2"], ["q_proj", "fc1"], 4, 8.0, 0.3, "diffusers")]
CASES = [  # (case name, base case, [(lora, scale)]); a case of one diffusers-saved LoRA is fused (fuse_lora)
    ("ink_1_wood_0.5", "euler", [("ink", 1.0), ("wood", 0.5)]),
    ("ink_0.5", "euler", [("ink", 0.5)]),
    ("ink_1_water_1", "euler", [("ink", 1.0), ("water", 1.0)]),
    ("reed_1", "euler", [("reed", 1.0)]),
]


def read_tokenizer(folder: Path):
    vocab = json.loads((folder / "vocab.json").read_text())
    merges = [line for line in (folder / "merges.txt").read_text().splitlines()[1:] if line]
    return vocab, merges


def rebuilt_pipeline(kind: str):
    vocab, merges = read_tokenizer(FIXTURES / kind / "model" / "tokenizer")
    pipe, _, _ = (bpf.build_sd15 if kind == "sd15" else bpf.build_sdxl)(vocab, merges)
    bpf.normalise_unet_output(pipe.unet)
    return pipe


def random_lora(pipe, name: str, unet_targets, text_targets, rank: int, alpha: float, std: float, seed: int):
    """peft adapters on the UNet and text encoder(s), every factor drawn at random (peft starts B at 0)."""
    from peft import LoraConfig, inject_adapter_in_model

    gen = torch.Generator().manual_seed(seed)
    models = [("unet", pipe.unet, unet_targets), ("text_encoder", pipe.text_encoder, text_targets)]
    if getattr(pipe, "text_encoder_2", None) is not None:
        models.append(("text_encoder_2", pipe.text_encoder_2, text_targets))
    models = [m for m in models if m[2]]
    for _, model, targets in models:
        inject_adapter_in_model(LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets), model,
                                adapter_name=name)
        with torch.no_grad():
            for key, param in model.named_parameters():
                if f".{name}." in key and "lora_" in key:
                    param.copy_(torch.randn(param.shape, generator=gen) * std)
    return models


def save_lora(models, name: str, layout: str, folder: Path, pipe=None) -> Path:
    from diffusers.utils import convert_state_dict_to_kohya
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    if layout == "diffusers":  # the pipeline's own save_lora_weights, adapter configs as header metadata
        layers = {f"{prefix}_lora_layers": get_peft_model_state_dict(model, adapter_name=name)
                  for prefix, model, _ in models}
        metadata = {f"{prefix}_lora_adapter_metadata": model.peft_config[name].to_dict() for prefix, model, _ in models}
        type(pipe).save_lora_weights(str(folder), weight_name=f"{name}.safetensors", **layers, **metadata)
        return folder / f"{name}.safetensors"
    state = {}
    for prefix, model, _ in models:
        peft_state = get_peft_model_state_dict(model, adapter_name=name)
        state.update({f"{prefix}.{k}": v.contiguous() for k, v in peft_state.items()})
    if layout == "kohya":
        state = convert_state_dict_to_kohya(state)
    # else: diffusers' own PEFT layout (what save_lora_weights writes): unet.<module>.lora_A.weight
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.safetensors"
    save_file({k: v.to(torch.float16).contiguous() if v.is_floating_point() else v for k, v in state.items()},
              str(path))
    return path


def build_kind(kind: str) -> None:
    root = FIXTURES / kind
    cases = {c["name"]: c for c in json.loads((root / "cases.json").read_text())["cases"]}
    base = json.loads((root / "model" / "scheduler" / "scheduler_config.json").read_text())
    pipe = rebuilt_pipeline(kind)
    case = next(c for c in (bpf.SD15_CASES if kind == "sd15" else bpf.SDXL_CASES) if c.name == "euler")
    noise = np.load(root / "noise" / case.noise)
    plain, _ = pc.run_case(pipe, case, base, noise, kind == "sdxl", 0)
    recorded = np.load(root / cases["euler"]["reference"])["image"]
    check = pc.psnr(recorded, plain["image"])
    print(f"{kind}: rebuilt torch pipeline vs the committed euler reference: {check:.1f} dB")
    assert check > 80, "the rebuilt pipeline is not the fixture's"
    paths = {}
    for seed, (name, unet_t, text_t, rank, alpha, std, layout) in enumerate(LORAS):
        pipe = rebuilt_pipeline(kind)
        models = random_lora(pipe, name, unet_t, text_t, rank, alpha, std, 1000 + seed)
        paths[name] = save_lora(models, name, layout, root / "loras", pipe)
    out = root / "lora_references"
    out.mkdir(exist_ok=True)
    described = []
    for name, base_case, uses in CASES:
        fresh = rebuilt_pipeline(kind)
        for lora, _ in uses:
            fresh.load_lora_weights(str(paths[lora]), adapter_name=lora)
        fresh.set_adapters([lora for lora, _ in uses], adapter_weights=[scale for _, scale in uses])
        if len(uses) == 1 and dict((n, lay) for n, *_, lay in LORAS)[uses[0][0]] == "diffusers":
            fresh.fuse_lora(lora_scale=1.0, adapter_names=[uses[0][0]])  # into the weights, then the adapter goes
            fresh.unload_lora_weights()
        arrays, _ = pc.run_case(fresh, case, base, noise, kind == "sdxl", 0)
        np.savez_compressed(out / f"{name}.npz", image=arrays["image"].astype(np.float32))
        vs_plain = pc.psnr(arrays["image"], plain["image"])
        described.append({"name": name, "case": base_case, "loras": [{"name": n, "scale": s} for n, s in uses],
                          "reference": f"lora_references/{name}.npz", "psnr_db_vs_no_lora": round(vs_plain, 1)})
        print(f"  {kind}/{name}: diffusers image vs the same render without LoRA {vs_plain:.1f} dB")
    loras = [{"name": n, "file": f"loras/{n}.safetensors", "layout": layout, "rank": rank, "alpha": alpha,
              "unet_targets": u, "text_targets": t} for n, u, t, rank, alpha, _, layout in LORAS]
    (root / "lora_cases.json").write_text(json.dumps({"loras": loras, "cases": described}, indent=2) + "\n")


def main() -> int:
    torch.set_num_threads(1)
    for kind in sys.argv[1:] or ["sd15", "sdxl"]:
        build_kind(kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
