"""What a TAESD step preview costs (issue 44 item 3: at most 2 % of a step), here and at the Pi's constants.

Builds a full-size random-weight TAESD decoder with ``frame model import --tiny-vae`` (madebyollin's
single-file layout, ``--weights`` precision), then times ``frame.diffusion.previews.TinyPreviewer`` on a
(1, 4, 64, 64) latent (a 512² night: pooled to 32² latent pixels, a 256² preview) over ``--runs``
previews with the decoder kept loaded as in a render (wall and CPU medians, the load average beside
them), and counts the same decode at the Raspberry Pi Zero 2 W's constants (``frame.estimate.pi``, as
``frame estimate`` projects). The share is against a denoising step's time: ``--step-seconds-here`` for
this machine (none measured here by default), ``--pi-step-seconds`` for the Pi (default: SD 1.5 uint8's
counted step, docs/estimate.md, 5 min 47 s; an SDXL Turbo step is 5 min 55 s).

    PYTHONPATH=$PWD python benchmarks/tiny_vae_preview.py --weights uint8 --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PI_SD15_UINT8_STEP = 5 * 60 + 47.0


def build(work: Path, weights: str) -> Path:
    from frame.cli.program import main
    from frame.convert.graphs import TinyVaeConfig, build_taesd_decoder, weight_specs
    from tests.convert.checkpoint.helpers import write_safetensors

    rng = np.random.default_rng(0)
    decoder = {k: (0.02 * rng.standard_normal(s)).astype(np.float16)
               for k, s in weight_specs(build_taesd_decoder(TinyVaeConfig()))}
    published = {f"{int(k.split('.')[2]) + 1}.{'.'.join(k.split('.')[3:])}": v for k, v in decoder.items()}
    src = write_safetensors(work / "taesd_decoder.safetensors", published)
    assert main(["model", "import", "--tiny-vae", "--weights", weights, str(src), str(work / "taesd")]) == 0
    return work / "taesd"


def pi_seconds(decoder: str, latent: int) -> float:
    from frame.estimate import pi
    from frame.estimate.counting import count_graph
    from frame.estimate.timing import evaluation_time

    count = count_graph(decoder, {"latent_sample": (1, 4, latent, latent)})
    rates = pi.pi_throughput([s.signature for s in count.steps if s.signature is not None])
    return evaluation_time(count, rates, rates.read_bytes, "prefetch", False).seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", choices=("fp32", "fp16", "uint8"), default="uint8")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--latent", type=int, default=64, help="the night's latent side (64: 512x512)")
    parser.add_argument("--pi-step-seconds", type=float, default=PI_SD15_UINT8_STEP)
    parser.add_argument("--step-seconds-here", type=float, default=None)
    args = parser.parse_args()
    from frame.diffusion.pipeline import engine_loader
    from frame.diffusion.previews import PREVIEW_LATENT, TinyPreviewer, pooled
    from frame.diffusion.vae.tiny import open_tiny_vae

    with tempfile.TemporaryDirectory(prefix="tiny-vae-preview-") as work:
        folder = build(Path(work), args.weights)
        tiny = open_tiny_vae(str(folder), None, False)
        previewer = TinyPreviewer(engine_loader(), tiny)
        latents = np.random.default_rng(1).standard_normal((1, 4, args.latent, args.latent)).astype(np.float32)
        previewer.decode(latents)  # the load and the plan, once per night
        walls, cpus = [], []
        for _ in range(args.runs):
            wall, cpu = time.perf_counter(), time.process_time()
            previewer.decode(latents)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        previewer.close()
        side = pooled(latents).shape[2]
        pi = pi_seconds(tiny.decoder, side)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"preview of a {args.latent}x{args.latent} latent: TAESD at {side}x{side} (at most {PREVIEW_LATENT}), "
          f"{args.weights}, {args.runs} runs, load average {os.getloadavg()[0]:.1f}")
    print(f"here: wall {wall:.3f} s, CPU {cpu:.3f} s (median)"
          + (f"; {100 * wall / args.step_seconds_here:.2f} % of a {args.step_seconds_here:.0f} s step"
             if args.step_seconds_here else ""))
    print(f"Raspberry Pi Zero 2 W (counted): {pi:.1f} s, {100 * pi / args.pi_step_seconds:.2f} % of a "
          f"{args.pi_step_seconds:.0f} s step")


if __name__ == "__main__":
    main()
