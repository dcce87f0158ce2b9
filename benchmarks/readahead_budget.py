"""One model evaluation with the ``prefetch`` provider's read-ahead budget at 16 MB and at 32 MB.

Each run is a fresh child process: load the model, run it once, report the evaluation's wall and CPU
seconds (all threads: the read-ahead thread counts) and the child's own peak (``VmHWM``). Runs are
interleaved (16, 32, 16, 32, ...) so a shared machine's load changes hit both budgets alike; the
medians are printed side by side.

This machine reads a model from the page cache at GB/s, so the read-ahead budget hardly matters here.
``--read-mb-s R`` makes every read of the provider's reader take at least ``bytes / R`` seconds (a
sleep after the read, on whichever thread reads: the read-ahead thread or the op asking for a weight
larger than the budget), i.e. storage as slow *relative to this machine's compute* as the Pi's SD card
is to the Pi's: 23 MB/s × (Pi compute seconds / this machine's) for the model. Row-streamed weights
(read block by block by their ops) are not slowed, as in both budgets.

    PYTHONPATH=. .venv/bin/python benchmarks/readahead_budget.py /tmp/sdxlfig/sdxl-turbo-uint8/unet/model.onnx \
        --feeds unet-sdxl --latent 64 --runs 3 --read-mb-s 215
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20


def child(model_path: str, feeds_kind: str, latent: int, budget_mb: int, read_mb_s: float) -> dict:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from engine_profile import feeds_for

    from frame.engine import load_model
    from frame.engine.providers.prefetch import Prefetch

    class SlowPrefetch(Prefetch):
        """Prefetch whose reads take at least bytes / ``read_mb_s`` seconds."""

        def _fetch(self, location: str, offset: int, length: int, alignment: int = 1):
            start = time.perf_counter()
            buf = super()._fetch(location, offset, length, alignment)
            rest = length / (read_mb_s * 1e6) - (time.perf_counter() - start)
            if rest > 0:
                time.sleep(rest)
            return buf

    cls = SlowPrefetch if read_mb_s else Prefetch
    model = load_model(model_path, weights=cls(budget_bytes=budget_mb * MB))
    feeds = feeds_for(feeds_kind, latent)
    start, start_cpu = time.perf_counter(), time.process_time()
    model.run(feeds)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    status = Path("/proc/self/status").read_text()
    peak = int(status.split("VmHWM:")[1].split()[0]) / 1024
    return {"budget_mb": budget_mb, "wall_s": wall, "cpu_s": cpu, "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--feeds", default="unet-sdxl")
    parser.add_argument("--latent", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 32], help="read-ahead budgets in MB")
    parser.add_argument("--read-mb-s", type=float, default=0.0, help="slow every read to this rate (0: as stored)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.model, args.feeds, args.latent, args.child, args.read_mb_s)))
        return
    results: dict[int, list[dict]] = {b: [] for b in args.budgets}
    for run in range(args.runs):
        for budget in args.budgets:
            cmd = [sys.executable, __file__, args.model, "--feeds", args.feeds, "--latent", str(args.latent),
                   "--read-mb-s", str(args.read_mb_s), "--child", str(budget)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"budget {budget} MB failed:\n{proc.stderr[-3000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            results[budget].append(result)
            print(f"run {run + 1} budget {budget} MB: {result['wall_s']:.1f} s wall, {result['cpu_s']:.1f} s CPU, "
                  f"VmHWM {result['peak_mb']:.1f} MB", flush=True)
    print(f"{Path(args.model)}, reads at {args.read_mb_s or 'stored'} MB/s, medians of {args.runs}:")
    for budget, rows in results.items():
        print(f"  {budget:3d} MB: {statistics.median(r['wall_s'] for r in rows):.1f} s wall, "
              f"{statistics.median(r['cpu_s'] for r in rows):.1f} s CPU, "
              f"VmHWM {statistics.median(r['peak_mb'] for r in rows):.1f} MB")


if __name__ == "__main__":
    main()
