"""Peak memory of a full-size SD 1.5 render with frame's pipeline (targets: ≤ 300 MB).

Uses the full-size random-weight SD 1.5 components the engine benchmark exports to
``/work/cache/sd15-full`` (``benchmarks/engine_vs_onnxruntime.py``; not re-exported here) and dresses
them as a diffusers ONNX export (model_index.json, scheduler, tokenizer and configs from the bundled
demo model, component configs with SD 1.5's sizes) in ``<cache>-pipeline`` via symlinks.

Each measurement runs in its own process and reports its own peak RSS (``VmHWM`` from
/proc/self/status, includes Python and numpy):

* ``render``: 512×512, 2 steps, guidance 7.5, the two guidance passes one after the other
  (``guidance_mode="sequential"``: every weight read twice per step), tiled VAE decode;
* ``render-shared``: the same with both passes sharing each weight fetch (``guidance_mode="shared"``,
  what ``guidance_plan`` chooses when it fits the worker's memory limit);
* ``render-batched``: the same with both passes as one UNet batch of two (``guidance_mode="batched"``);
* ``decode-tiled`` vs ``decode-whole``: the VAE decoder on a 64×64 latent, 32×32 tiles (overlap 8) vs
  in one piece.

``--weights uint8`` (or ``fp16``) renders from the folder converted with ``frame model convert``
(``<cache>-pipeline-<weights>``, made by ``benchmarks/convert_memory.py --what folder`` or here when
missing); the target for a uint8 render is 250 MB. ``--runs N`` repeats each measurement and prints
the median.

Usage::

    .venv/bin/python benchmarks/sd_memory.py [--cache /work/cache/sd15-full] [--only render,decode-tiled]
    .venv/bin/python benchmarks/sd_memory.py --weights uint8 --only render --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = {"fp32": 300, "fp16": 300, "uint8": 250}
UNET_CONFIG = {"_class_name": "UNet2DConditionModel", "sample_size": 64, "in_channels": 4,
               "block_out_channels": [320, 640, 1280, 1280], "cross_attention_dim": 768}
VAE_CONFIG = {"_class_name": "AutoencoderKL", "block_out_channels": [128, 256, 512, 512], "latent_channels": 4,
              "scaling_factor": 0.18215, "sample_size": 512}
TEXT_CONFIG = {"_class_name": "CLIPTextModel", "hidden_size": 768, "num_hidden_layers": 12}


def assemble(cache: Path, folder: Path | None = None) -> Path:
    """A pipeline folder (default ``<cache>-pipeline``) of symlinks to the exported components plus
    small JSON/tokenizer files."""
    sys.path.insert(0, str(ROOT))
    from frame.models import demo_model_path

    missing = [c for c in ("text_encoder", "unet", "vae_decoder") if not (cache / c / "model.onnx").is_file()]
    if missing:
        raise SystemExit(f"{cache} lacks {', '.join(missing)}: run benchmarks/engine_vs_onnxruntime.py first")
    folder = folder or Path(str(cache) + "-pipeline")
    demo = demo_model_path()
    for sub in ("scheduler", "tokenizer"):
        shutil.copytree(demo / sub, folder / sub, dirs_exist_ok=True)
    shutil.copy(demo / "model_index.json", folder / "model_index.json")
    for component, config in (("text_encoder", TEXT_CONFIG), ("unet", UNET_CONFIG), ("vae_decoder", VAE_CONFIG)):
        (folder / component).mkdir(parents=True, exist_ok=True)
        (folder / component / "config.json").write_text(json.dumps(config))
        for name in ("model.onnx", "model.onnx_data"):
            target, link = cache / component / name, folder / component / name
            if target.exists() and not link.exists():
                link.symlink_to(target)
    return folder


class PhasePeaks:
    """Peak RSS per pipeline phase: VmHWM is read and reset (``/proc/self/clear_refs``) at each change."""

    def __init__(self) -> None:
        self.phase = "load"
        self.peaks: dict[str, float] = {}

    @staticmethod
    def high_water_mb() -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def switch(self, phase: str) -> None:
        if phase == self.phase:
            return
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), round(self.high_water_mb(), 1))
        Path("/proc/self/clear_refs").write_text("5")
        self.phase = phase


def child(kind: str, folder: str, vae_tile: int = 32) -> None:
    """Run one measurement in this process and print a JSON line with its results."""
    import numpy as np

    from frame.diffusion import RenderPlan, load_pipeline

    mode = {"render-batched": "batched", "render-shared": "shared"}.get(kind, "sequential") \
        if kind.startswith("render") else None
    pipe = load_pipeline(folder, plan=RenderPlan(vae_tile=vae_tile, guidance_mode=mode))
    started, cpu_started = time.perf_counter(), time.process_time()
    if kind.startswith("render"):
        steps, phases, fetched = [], PhasePeaks(), []

        def callback(progress) -> None:
            phases.switch(progress.phase)
            if progress.step_done:
                steps.append(time.perf_counter() - started)
                fetched.append(progress.bytes_per_step)

        image = pipe.generate(pipe.settings("a lighthouse in a storm, oil painting", steps=2, guidance=7.5,
                                            sampler="euler", seed=1, width=512, height=512), callback=callback)
        phases.switch("done")
        detail = {"size": list(image.size), "step_seconds": [round(s, 1) for s in steps],
                  "bytes_per_step": fetched, "phase_peak_rss_mb": phases.peaks}
    else:
        latents = np.random.default_rng(0).standard_normal((1, 4, 64, 64)).astype(np.float32)
        image = pipe.decode(latents, tiled=kind == "decode-tiled")
        detail = {"size": list(image.size)}
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    peak_mb = PhasePeaks.high_water_mb()
    # clear_refs resets the kernel's high-water mark: take the phase maximum too
    peak_mb = max([peak_mb, *detail.get("phase_peak_rss_mb", {}).values()])
    print(json.dumps({"kind": kind, "peak_rss_mb": round(peak_mb, 1), "seconds": round(seconds, 1),
                      "cpu_seconds": round(cpu_seconds, 1), **detail}))


def measure(kind: str, folder: Path, vae_tile: int = 32) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--folder", str(folder),
                           "--vae-tile", str(vae_tile)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"kind": kind, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def converted(folder: Path, weights: str) -> Path:
    """``folder`` converted with ``frame model convert`` (once; kept for later runs)."""
    target = Path(f"{folder}-{weights}")
    if not target.is_dir():
        from frame.cli.program import main as frame_main

        if frame_main(["model", "convert", str(folder), str(target), "--weights", weights]):
            raise SystemExit(f"conversion of {folder} failed")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/sd15-full"))
    parser.add_argument("--pipeline-dir", type=Path, default=None,
                        help="where to assemble the pipeline folder (default: <cache>-pipeline)")
    parser.add_argument("--only", default="render,render-shared,render-batched,decode-tiled,decode-whole")
    parser.add_argument("--weights", choices=("fp32", "fp16", "uint8"), default="fp32")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--vae-tile", type=int, default=32, help="VAE tile side in latent pixels (default 32)")
    parser.add_argument("--child")
    parser.add_argument("--folder")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.folder, args.vae_tile)
        return
    folder = assemble(args.cache, args.pipeline_dir)
    if args.weights != "fp32":
        folder = converted(folder, args.weights)
    target = TARGET_MB[args.weights]
    print(f"pipeline folder: {folder}  (target: peak RSS ≤ {target} MB)")
    for kind in args.only.split(","):
        results = [measure(kind, folder, args.vae_tile) for _ in range(args.runs)]
        peaks = [r["peak_rss_mb"] for r in results if "peak_rss_mb" in r]
        result = dict(results[-1])
        if peaks:
            result.update(peak_rss_mb=statistics.median(peaks), runs_peak_rss_mb=peaks)
        verdict = "" if not peaks else (
            "  OK" if result["peak_rss_mb"] <= target else "  over target" if kind in ("render", "decode-tiled")
            else "  (comparison)")
        print(json.dumps(result) + verdict, flush=True)


if __name__ == "__main__":
    main()
