"""Image-to-image on full-size SD 1.5: peak memory of the VAE encoder (whole vs tiled) and of a render.

Step 1 (``--export``, dev-only: torch + diffusers) exports the encoder of a full-size random-weight SD 1.5
``AutoencoderKL`` (the same config and seed as the decoder in ``benchmarks/engine_vs_onnxruntime.py``) as
optimum < 1.23 writes it (``latent_dist.sample()`` traced: output ``latent_sample``, an in-graph
RandomNormalLike) to ``<encoder-cache>/vae_encoder/``, with ``tools/diffusers_export.export_vae_encoder``.

Step 2 runs each measurement in its own process and prints its own peak RSS (``VmHWM`` from
/proc/self/status: Python, numpy and the model included), wall and CPU seconds:

* ``encode-whole`` / ``encode-tiled``: frame's engine encodes a 512×512 picture in one piece / in 32×32
  latent tiles (256×256 pixels, overlap 8, the decoder's defaults); with both, the relative L2
  difference of the two latents (same posterior draw) is printed too;
* ``encode-ort``: onnxruntime encodes it in one piece (comparison; run under the big-memory lock);
* ``render-img2img``: a whole 512×512 image-to-image render (20 steps at strength 0.1: 2 UNet steps,
  guidance 7.5, euler) on the full-size UNet, text encoder and VAE from ``/work/cache/sd15-full``
  (``benchmarks/engine_vs_onnxruntime.py --export-only``) plus this encoder, with the per-phase peaks;
* ``render-txt2img``: the same folder, prompt and 2 UNet steps as text-to-image (``sd_memory.py``'s
  ``render``), for a like-for-like comparison in the same run.

Usage::

    .venv/bin/python benchmarks/img2img_memory.py --export
    .venv/bin/python benchmarks/img2img_memory.py [--only encode-tiled,encode-whole] [--runs 3]
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
ENCODER_CACHE = Path("/work/cache/i16-img2img/sd15-vae-encoder")
PIPELINE = Path("/work/cache/i16-img2img/sd15-pipeline")
KINDS = ("encode-tiled", "encode-whole", "encode-ort", "render-img2img", "render-txt2img")


def export(cache: Path) -> None:
    """The full-size SD 1.5 VAE encoder in optimum < 1.23's style (random weights, seed 0)."""
    import torch
    from diffusers import AutoencoderKL

    sys.path.insert(0, str(ROOT / "tools"))
    import diffusers_export as dx

    torch.manual_seed(0)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
                        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[128, 256, 512, 512],
                        layers_per_block=2, latent_channels=4, sample_size=512).eval()
    report = dx.ExportReport()
    dx.export_vae_encoder(report, vae, cache, "sampled", size=(64, 64))
    print("onnxruntime (noise fed) vs torch:\n" + report.summary())


def assemble(cache: Path, full: Path) -> Path:
    """A pipeline folder of symlinks: sd_memory's full-size SD 1.5 components plus the encoder."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sd_memory import TEXT_CONFIG, UNET_CONFIG, VAE_CONFIG

    from frame.models import demo_model_path

    demo = demo_model_path()
    for sub in ("scheduler", "tokenizer"):
        shutil.copytree(demo / sub, PIPELINE / sub, dirs_exist_ok=True)
    shutil.copy(demo / "model_index.json", PIPELINE / "model_index.json")
    sources = {"text_encoder": full, "unet": full, "vae_decoder": full, "vae_encoder": cache}
    configs = {"text_encoder": TEXT_CONFIG, "unet": UNET_CONFIG, "vae_decoder": VAE_CONFIG, "vae_encoder": VAE_CONFIG}
    for component, base in sources.items():
        (PIPELINE / component).mkdir(parents=True, exist_ok=True)
        (PIPELINE / component / "config.json").write_text(json.dumps(configs[component]))
        for name in ("model.onnx", "model.onnx_data"):
            target, link = base / component / name, PIPELINE / component / name
            if target.exists() and not link.exists():
                link.symlink_to(target)
    return PIPELINE


def _peak_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024


def child(kind: str, cache: Path, save: str | None) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    pixels = rng.uniform(-1, 1, (1, 3, 512, 512)).astype(np.float32)
    noise = rng.standard_normal((1, 4, 64, 64)).astype(np.float32)
    source = str(cache / "vae_encoder" / "model.onnx")
    start, start_cpu = time.perf_counter(), time.process_time()
    detail: dict = {}
    if kind == "encode-ort":
        import onnxruntime as ort

        session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
        latent = session.run(None, {"sample": pixels})[0]
    elif kind.startswith("encode"):
        from frame.diffusion.pipeline import engine_loader
        from frame.diffusion.vae import encoder

        latent = encoder.encode(engine_loader(), source, pixels, noise, 0.18215, tiled=kind == "encode-tiled")
    else:
        from PIL import Image

        sys.path.insert(0, str(ROOT / "benchmarks"))
        from sd_memory import PhasePeaks

        from frame.diffusion import load_pipeline

        pipe = load_pipeline(PIPELINE)
        phases = PhasePeaks()
        picture = Image.fromarray(((pixels[0].transpose(1, 2, 0) + 1) * 127.5).astype(np.uint8))
        img2img = kind == "render-img2img"
        settings = pipe.settings("a lighthouse in a storm, oil painting", steps=20 if img2img else 2, guidance=7.5,
                                 sampler="euler", seed=1, width=512, height=512, strength=0.1 if img2img else None)
        image = pipe.generate(settings, callback=lambda p: phases.switch(p.phase),
                              init_image=picture if img2img else None)
        phases.switch("done")
        latent = np.asarray(image)
        detail = {"phase_peak_rss_mb": phases.peaks}
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    peak = max([_peak_mb(), *detail.get("phase_peak_rss_mb", {}).values()])
    if save:
        np.save(save, latent)
    print(json.dumps({"kind": kind, "peak_rss_mb": round(peak, 1), "seconds": round(seconds, 1),
                      "cpu_seconds": round(cpu, 1), "shape": list(latent.shape), **detail}))


def measure(kind: str, cache: Path, save: Path | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, __file__, "--child", kind, "--encoder-cache", str(cache)]
    if save is not None:
        command += ["--save", str(save)]
    if kind == "encode-ort":  # onnxruntime's arena on a 512x512 encoder: the shared machine's big-memory rule
        command = ["flock", "/work/locks/bigmem.lock", *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"kind": kind, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder-cache", type=Path, default=ENCODER_CACHE)
    parser.add_argument("--full", type=Path, default=Path("/work/cache/sd15-full"),
                        help="the full-size SD 1.5 components of benchmarks/engine_vs_onnxruntime.py")
    parser.add_argument("--export", action="store_true")
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child")
    parser.add_argument("--save", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.encoder_cache, args.save)
        return
    if args.export:
        export(args.encoder_cache)
        return
    if "render" in args.only:
        assemble(args.encoder_cache, args.full)
    import tempfile

    import numpy as np

    saved = Path(tempfile.mkdtemp(prefix="img2img-memory-"))
    for kind in args.only.split(","):
        results = [measure(kind, args.encoder_cache, saved / f"{kind}.npy") for _ in range(args.runs)]
        good = [r for r in results if "peak_rss_mb" in r]
        summary = dict(results[-1])
        for key in ("peak_rss_mb", "seconds", "cpu_seconds"):
            if good:
                summary[key] = statistics.median(r[key] for r in good)
                summary[f"runs_{key}"] = [r[key] for r in good]
        print(json.dumps(summary), flush=True)
    if (saved / "encode-tiled.npy").exists() and (saved / "encode-whole.npy").exists():
        tiled, whole = np.load(saved / "encode-tiled.npy"), np.load(saved / "encode-whole.npy")
        rel = float(np.linalg.norm(tiled - whole) / np.linalg.norm(whole))
        print(json.dumps({"tiled_vs_whole_latent_rel_l2": round(rel, 4)}))
    shutil.rmtree(saved, ignore_errors=True)


if __name__ == "__main__":
    main()
