"""Classifier-free guidance on the full-size SD 1.5 UNet: bytes fetched, time and peak memory per step
for each way of running the two passes (``frame.diffusion.denoise.GUIDANCE_MODES``).

* ``sequential``: one pass after the other (every weight read twice per step);
* ``batched``: one batch of two through the UNet;
* ``shared``: one pass over the graph, each op running both items while its weights are held.

Each measurement is its own process: it loads the UNet with the default weights provider (prefetch),
runs ``--steps`` guided steps at ``--size`` with random conditioning, and reports per step the wall and
CPU seconds and the bytes the engine fetched (per source kind), and the process's peak RSS (``VmHWM``,
includes Python and numpy). Medians over ``--runs`` processes per mode.

Usage::

    .venv/bin/python benchmarks/guidance_passes.py [--unet /work/cache/sd15-full/unet/model.onnx]
        [--modes sequential,batched,shared] [--size 512x512] [--steps 1] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def high_water_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(mode: str, unet_path: str, size: tuple[int, int], steps: int, weights: str) -> None:
    import numpy as np

    from frame.diffusion.conditioning import Conditioning
    from frame.diffusion.denoise import GuidedUNet
    from frame.engine import load_model

    rng = np.random.default_rng(0)
    width, height = size
    latent = rng.standard_normal((1, 4, height // 8, width // 8)).astype(np.float32)
    with load_model(unet_path, weights=weights) as model:
        hidden = next(i for i in model.inputs if i.name == "encoder_hidden_states").shape[-1]
        cond = Conditioning(rng.standard_normal((1, 77, hidden)).astype(np.float32))
        uncond = Conditioning(rng.standard_normal((1, 77, hidden)).astype(np.float32))
        unet = GuidedUNet(model, cond, uncond, 7.5, size, mode)
        load_peak = high_water_mb()
        records, out = [], None
        for index in range(steps):
            before, wall, cpu = model.fetch_stats, time.perf_counter(), time.process_time()
            out = unet(latent, 999.0 - index)
            fetched = model.fetch_stats - before
            records.append({"wall_s": round(time.perf_counter() - wall, 2),
                            "cpu_s": round(time.process_time() - cpu, 2),
                            "bytes": fetched.total_bytes, "by_kind": fetched.bytes})
        streamed = sum(ref.nbytes for ref in model.streamed_weights)
        print(json.dumps({"mode": unet.mode, "weight_bytes": streamed, "load_peak_mb": round(load_peak, 1),
                          "peak_mb": round(high_water_mb(), 1), "steps": records,
                          "out_checksum": float(np.abs(out).sum())}))


def measure(mode: str, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, __file__, "--child", mode, "--unet", args.unet, "--size", args.size,
               "--steps", str(args.steps), "--weights", args.weights]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"mode": mode, "error": done.stderr.strip().splitlines()[-3:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(mode: str, results: list[dict]) -> dict:
    ok = [r for r in results if "error" not in r]
    if not ok:
        return {"mode": mode, "errors": [r["error"] for r in results]}
    steps = [s for r in ok for s in r["steps"]]
    per_step = statistics.median(s["bytes"] for s in steps)
    return {"mode": mode, "runs": len(ok), "weight_bytes": ok[0]["weight_bytes"], "bytes_per_step": per_step,
            "bytes_per_step_over_weights": round(per_step / ok[0]["weight_bytes"], 3),
            "wall_s_per_step": statistics.median(s["wall_s"] for s in steps),
            "cpu_s_per_step": statistics.median(s["cpu_s"] for s in steps),
            "peak_mb": statistics.median(r["peak_mb"] for r in ok), "peaks_mb": [r["peak_mb"] for r in ok],
            "walls_s": [s["wall_s"] for s in steps], "cpus_s": [s["cpu_s"] for s in steps],
            "out_checksum": ok[0]["out_checksum"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unet", default="/work/cache/sd15-full/unet/model.onnx")
    parser.add_argument("--modes", default="sequential,batched,shared")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--weights", default="prefetch", help="weights provider (default prefetch)")
    parser.add_argument("--child")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    if args.child:
        child(args.child, args.unet, (width, height), args.steps, args.weights)
        return
    print(f"UNet {args.unet}, {args.size}, {args.steps} step(s) per process, {args.runs} process(es) per mode; "
          "runs interleaved", flush=True)
    modes = args.modes.split(",")
    results: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.runs):  # interleaved, so machine load drifts affect every mode alike
        for mode in modes:
            result = measure(mode, args)
            results[mode].append(result)
            print("  " + json.dumps(result), flush=True)
    for mode in modes:
        print(json.dumps(summary(mode, results[mode])), flush=True)


if __name__ == "__main__":
    main()
