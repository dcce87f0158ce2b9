"""Export the full-size SDXL base architecture with random weights in the diffusers ONNX layout.

Dev-only (torch, diffusers, transformers). Writes ``<out>/fp32/`` as ``optimum-cli export onnx`` lays
out an SDXL export (model_index.json, scheduler/, tokenizer[_2]/, text_encoder[_2]/, unet/,
vae_decoder/, a config.json per component; TorchScript exporter, opset 14, optimum's I/O names and
dynamic axes) with the real sizes:

* ``unet``: ``UNet2DConditionModel`` with SDXL base 1.0's config (2.57 B parameters, 10.3 GB fp32 in
  ``unet/model.onnx_data``);
* ``text_encoder``: CLIP ViT-L/14 ``CLIPTextModel`` (123 M, weights inside model.onnx);
* ``text_encoder_2``: OpenCLIP ViT-bigG/14 as ``CLIPTextModelWithProjection`` (hidden 1280, 32 layers,
  20 heads, projection 1280: 695 M, in model.onnx_data); both with ``hidden_states.N`` outputs;
* ``vae_decoder``: the SDXL ``AutoencoderKL`` decoder (scaling factor 0.13025).

Memory: each component is built and exported in its own process. torch's exporter writes every
weight of a > 2 GB model to its own file while it encodes (checked: 2.3 GB of Linear weights export
at +0.2 GB), so the UNet export peaks near its 10.3 GB of fp32 parameters; ``--lock`` takes the
machine's big-memory lock around that step only. The per-tensor files are then joined into one
``model.onnx_data`` by copying, tensor by tensor. ``<out>/reference/<name>.npz`` keeps torch's output
on the export's small sample (``--check`` compares frame's engine with it).

    .venv/bin/python tools/sdxl_full_export.py --out /work/cache/sdxl-full --lock /work/locks/bigmem.lock
    .venv/bin/python tools/sdxl_full_export.py --out /work/cache/sdxl-full --check
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import clip_vocab  # noqa: E402
import sdxl_configs as cfg  # noqa: E402
from external_data import join_external_data  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OPSET = 14
COMPONENTS = ("vae_decoder", "text_encoder", "text_encoder_2", "unet")
BIG = {"unet", "text_encoder_2"}
DONE_FILES = {"model.onnx", "model.onnx_data", "config.json"}  # > 2 GB of fp32 weights: external data, big-memory lock


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def big_memory_lock(path: str | None):
    """Hold ``flock(path)`` (the shared machine's "one big job at a time" lock) for the block."""
    if not path:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ------------------------------------------------------------------------- one component per process
def _export(module, feeds: dict[str, np.ndarray], outputs: list[str], axes: dict, folder: Path) -> None:
    """TorchScript export to ``folder/model.onnx``; per-tensor files for > 2 GB models are joined after."""
    import warnings

    import torch

    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        stale.unlink()
    args = tuple(torch.from_numpy(np.array(v, copy=True)) for v in feeds.values())
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(folder / "model.onnx"), dynamo=False, opset_version=OPSET,
                          input_names=list(feeds), output_names=outputs,
                          dynamic_axes={k: v for k, v in axes.items() if k in [*feeds, *outputs]},
                          do_constant_folding=True)


def _reference(module, feeds: dict[str, np.ndarray], outputs: list[str], path: Path) -> None:
    import onnx_export as ox

    ref = ox.run_torch(module, feeds, outputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{f"in.{k}": v for k, v in feeds.items()}, **{f"out.{k}": v for k, v in ref.items()})


def export_component(name: str, out: Path) -> None:
    """Build ``name`` with seeded random weights, record torch's outputs, export it (run in a child)."""
    import tiny_models as tm
    import torch

    folder = out / "fp32" / name
    started = time.perf_counter()
    if name == "unet":
        model = tm.unet(0, cfg.UNET)
        module = tm.UNetWrapper(model, text_time=True)
        feeds, outputs, axes = cfg.unet_feeds(), ["out_sample"], cfg.UNET_AXES
    elif name == "vae_decoder":
        model = tm.vae(0, cfg.VAE)
        module = tm.VaeDecoderWrapper(model)
        feeds, outputs, axes = cfg.vae_feeds(), ["sample"], cfg.VAE_AXES
    else:
        config = cfg.CLIP_L if name == "text_encoder" else cfg.CLIP_BIGG
        model = tm.clip_text(0 if name == "text_encoder" else 1, config, with_projection=name == "text_encoder_2")
        module = tm.ClipTextWrapper(model, hidden_states=True)
        outputs = module.output_names()
        feeds, axes = cfg.text_feeds(config["vocab_size"]), cfg.text_axes(outputs)
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {params / 1e6:.1f} M parameters, built in {time.perf_counter() - started:.0f} s, "
          f"peak {peak_mb():.0f} MB", flush=True)
    with torch.no_grad():
        _reference(module, feeds, outputs, out / "reference" / f"{name}.npz")
    _export(module, feeds, outputs, axes, folder)
    if name in ("unet", "vae_decoder"):
        model.save_config(str(folder))  # diffusers' config.json (_class_name, every argument)
    else:
        model.config.save_pretrained(str(folder))
    print(f"{name}: exported in {time.perf_counter() - started:.0f} s, peak {peak_mb():.0f} MB", flush=True)


def finish_component(name: str, out: Path) -> None:
    """Join per-tensor external files into model.onnx_data (or check a single-file model)."""
    import onnx

    path = out / "fp32" / name / "model.onnx"
    stray = [p for p in path.parent.iterdir() if p.name not in DONE_FILES]
    if stray:
        written = join_external_data(path, "model.onnx_data")
        print(f"{name}: joined {len(stray)} weight files into model.onnx_data ({written / 1e9:.2f} GB)", flush=True)
    onnx.checker.check_model(str(path))


# --------------------------------------------------------------------------------- the small files
def write_small_files(out: Path) -> None:
    """model_index.json, scheduler and both tokenizers (the real CLIP BPE, from the bundled demo model)."""
    sys.path.insert(0, str(REPO))
    from frame.models import demo_model_path

    root = out / "fp32"
    root.mkdir(parents=True, exist_ok=True)
    (root / "model_index.json").write_text(json.dumps(cfg.MODEL_INDEX, indent=2) + "\n")
    (root / "scheduler").mkdir(exist_ok=True)
    (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(cfg.BASE_SCHEDULER, indent=2) + "\n")
    demo = demo_model_path() / "tokenizer"
    vocab = json.loads((demo / "vocab.json").read_text(encoding="utf-8"))
    merges = (demo / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    clip_vocab.write_tokenizer(root / "tokenizer", vocab, merges, clip_vocab.EOS)
    clip_vocab.write_tokenizer(root / "tokenizer_2", vocab, merges, "!")


def run_child(name: str, out: Path, lock: str | None) -> None:
    command = [sys.executable, __file__, "--out", str(out), "--child", name]
    with big_memory_lock(lock if name in BIG else None):
        subprocess.run(command, check=True)
    finish_component(name, out)


def convert(out: Path, weights: str) -> None:
    """``frame model convert`` of the fp32 folder (streamed: ~200 MB peak for the whole SDXL folder)."""
    target = out / weights
    if (target / "model_index.json").is_file():
        print(f"{weights}: converted", flush=True)
        return
    subprocess.run([sys.executable, "-m", "frame", "model", "convert", str(out / "fp32"), str(target),
                    "--weights", weights], check=True, cwd=REPO)


def make_turbo(out: Path, precision: str) -> Path:
    """``turbo-<precision>/``: SDXL-Turbo's scheduler and 512x512 UNet config around the same components.

    SDXL-Turbo has the base UNet's architecture; only the weights (random here anyway), the
    scheduler (Euler ancestral, trailing spacing) and the native size (UNet sample_size 64) differ.
    """
    source, folder = out / precision, out / f"turbo-{precision}"
    for sub in ("text_encoder", "text_encoder_2", "unet", "vae_decoder", "tokenizer", "tokenizer_2"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        for item in (source / sub).iterdir():
            link = folder / sub / item.name
            if item.name == "config.json" and sub == "unet":
                config = json.loads(item.read_text())
                config.update(cfg.TURBO_UNET_OVERRIDES)
                link.write_text(json.dumps(config, indent=2) + "\n")
            elif not link.exists():
                link.symlink_to(item.resolve())
    (folder / "scheduler").mkdir(exist_ok=True)
    (folder / "scheduler" / "scheduler_config.json").write_text(json.dumps(cfg.TURBO_SCHEDULER, indent=2) + "\n")
    index = json.loads((source / "model_index.json").read_text())
    index["scheduler"] = ["diffusers", "EulerAncestralDiscreteScheduler"]
    (folder / "model_index.json").write_text(json.dumps(index, indent=2) + "\n")
    return folder


def write_ready(out: Path) -> None:
    """READY: what exists, for helpers waiting on the export (one folder per line, with its size)."""
    from external_data import folder_bytes

    lines = ["# full-size SDXL, random weights (tools/sdxl_full_export.py); diffusers ONNX folders:"]
    for folder in sorted(p for p in out.iterdir() if (p / "model_index.json").is_file()):
        kind = "SDXL-Turbo layout (symlinks)" if folder.name.startswith("turbo-") else "SDXL base"
        lines.append(f"{folder}  {kind}, {folder_bytes(folder) / 1e9:.2f} GB of weights")
    lines.append(f"{out / 'reference'}  torch outputs on the export samples (<name>.npz: in.*, out.*)")
    (out / "READY").write_text("\n".join(lines) + "\n")
    print((out / "READY").read_text(), end="")


def check(out: Path, names: list[str]) -> None:
    """frame's engine on each exported component vs torch's recorded outputs (relative L2)."""
    sys.path.insert(0, str(REPO))
    from frame.engine import load_model

    for name in names:
        with np.load(out / "reference" / f"{name}.npz") as data:
            feeds = {k[3:]: data[k] for k in data.files if k.startswith("in.")}
            ref = {k[4:]: data[k] for k in data.files if k.startswith("out.")}
        started = time.perf_counter()
        got = load_model(str(out / "fp32" / name / "model.onnx")).run(feeds)
        worst = max(float(np.linalg.norm(got[k] - r) / max(np.linalg.norm(r), 1e-30)) for k, r in ref.items())
        print(f"{name}: frame vs torch worst rel L2 {worst:.2e} ({time.perf_counter() - started:.0f} s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/work/cache/sdxl-full"))
    parser.add_argument("--only", default=",".join(COMPONENTS))
    parser.add_argument("--lock", help="flock this file around the UNet and text_encoder_2 exports")
    parser.add_argument("--check", action="store_true", help="compare frame's engine with torch's outputs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    if args.child:
        export_component(args.child, args.out)
        return
    if args.check:
        check(args.out, names)
        return
    write_small_files(args.out)
    for name in names:
        folder = args.out / "fp32" / name
        if (folder / "config.json").is_file():
            if any(p.name not in DONE_FILES for p in folder.iterdir()):
                finish_component(name, args.out)  # exported, but the join was interrupted
            print(f"{name}: exported", flush=True)
            continue
        run_child(name, args.out, args.lock)
    os.sync()
    if set(names) == set(COMPONENTS):
        for weights in ("uint8", "fp16"):
            convert(args.out, weights)
        for precision in ("fp32", "fp16", "uint8"):
            make_turbo(args.out, precision)
        write_ready(args.out)


if __name__ == "__main__":
    main()
