"""A VAE decoder exported with a static 64×64 input: peak memory and pixels of its decode, beside the
dynamic export's (issue 28, item 5; target ≤ 300 MB for full-size SD 1.5 at 512×512).

Dev-only (torch, diffusers). Exports, with the same random weights as
``benchmarks/engine_vs_onnxruntime.py`` (``torch.manual_seed(0)``), the full-size SD 1.5 VAE decoder
*without* dynamic axes to ``<cache>/vae_decoder_static`` (TorchScript, opset 17: the mid-block
attention's Reshapes then bake 64×64 in), and assembles two pipeline folders with
the bundled demo model's small files: ``<cache>-vae-dynamic`` (the dynamic decoder) and
``<cache>-vae-static`` (the static one); only the decoder runs. Each decode then runs in its own process as a render
does it (``Pipeline.decode`` with ``tiled=None``: automatic) on the same random 64×64 latent and
reports its own peak (``VmHWM``), wall and CPU seconds; the parent compares the pixels. ``--whole``
adds the static decoder decoded whole (what a render did before the rewrite at load: no tiles).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/static_vae_memory.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = 300


def export_static(folder: Path) -> None:
    """The SD 1.5 VAE decoder of ``engine_vs_onnxruntime.export_vae_decoder`` with a fixed 1×4×64×64 input."""
    import onnx
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
                        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[128, 256, 512, 512],
                        layers_per_block=2, latent_channels=4, sample_size=512).eval()

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vae = vae

        def forward(self, latent_sample):
            return self.vae.decode(latent_sample, return_dict=False)[0]

    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / "raw.onnx"
    with torch.no_grad():
        torch.onnx.export(Decoder().eval(), (torch.randn(1, 4, 64, 64),), str(raw), dynamo=False, opset_version=17,
                          input_names=["latent_sample"], output_names=["sample"], do_constant_folding=True)
    proto = onnx.load(str(raw))
    onnx.save_model(proto, str(folder / "model.onnx"))
    raw.unlink()


def decoder_folder(cache: Path, static: bool) -> Path:
    """``<cache>-vae-dynamic`` or ``<cache>-vae-static``: a diffusers folder whose VAE decoder links to
    the export (the other components are the demo model's: only the decoder runs here)."""
    sys.path.insert(0, str(ROOT))
    from frame.models import demo_model_path

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sd_memory import VAE_CONFIG

    exported = cache / ("vae_decoder_static" if static else "vae_decoder") / "model.onnx"
    if not exported.is_file() and static:
        print(f"exporting the static VAE decoder to {exported} ...", flush=True)
        export_static(exported.parent)
    if not exported.is_file():
        raise SystemExit(f"{exported} is missing: run benchmarks/engine_vs_onnxruntime.py --export-only "
                         f"--models vae_decoder --cache {cache}")
    folder = Path(f"{cache}-vae-{'static' if static else 'dynamic'}")
    if not folder.is_dir():
        shutil.copytree(demo_model_path(), folder, symlinks=True)
    (folder / "vae_decoder" / "config.json").write_text(json.dumps(VAE_CONFIG))
    link = folder / "vae_decoder" / "model.onnx"
    link.unlink(missing_ok=True)
    link.symlink_to(exported)
    return folder


def child(folder: str, tiled: str, out: str) -> None:
    import numpy as np

    from frame.diffusion import load_pipeline

    pipe = load_pipeline(folder)
    latents = np.random.default_rng(0).standard_normal((1, 4, 64, 64)).astype(np.float32)
    started, cpu_started = time.perf_counter(), time.process_time()
    image = pipe.decode(latents, tiled={"auto": None, "whole": False}[tiled])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    np.save(out, np.asarray(image))
    peak = next(int(line.split()[1]) / 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmHWM:"))
    print(json.dumps({"peak_rss_mb": round(peak, 1), "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}))


def measure(folder: Path, tiled: str, out: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, "--child", str(folder), tiled, out], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{folder} ({tiled}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/sd15-full"))
    parser.add_argument("--runs", type=int, default=3, help="processes per case, alternating; medians")
    parser.add_argument("--whole", action="store_true", help="also decode the static decoder whole (before)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    import numpy as np

    cases = {"dynamic export, tiled": (decoder_folder(args.cache, False), "auto"),
             "static export, rewritten at load": (decoder_folder(args.cache, True), "auto")}
    if args.whole:
        cases["static export, decoded whole"] = (cases["static export, rewritten at load"][0], "whole")
    results: dict[str, list[dict]] = {name: [] for name in cases}
    pixels = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for name, (folder, tiled) in cases.items():
                out = os.path.join(tmp, f"{len(pixels)}.npy")
                results[name].append(measure(folder, tiled, out))
                pixels[name] = np.load(out).astype(int)
                print(f"  {name}: {results[name][-1]}", flush=True)
    reference = pixels["dynamic export, tiled"]
    print("| case | peak RSS (median) | wall s | CPU s | max pixel diff vs dynamic | runs |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        peak = statistics.median(r["peak_rss_mb"] for r in runs)
        print(f"| {name} | {peak:.1f} MB{' (≤ 300: met)' if peak <= TARGET_MB else ''} | "
              f"{statistics.median(r['seconds'] for r in runs):.1f} | "
              f"{statistics.median(r['cpu_seconds'] for r in runs):.1f} | "
              f"{np.abs(pixels[name] - reference).max()} | {len(runs)} |")


if __name__ == "__main__":
    main()
