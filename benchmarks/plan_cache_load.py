"""Loading a model planned afresh against loading its kept plan (``frame.engine.plan_cache``).

Each load runs in a fresh child process (imports done before the clock starts), so nothing of one
load helps the next: ``planned`` loads with no kept plan (the graph scanned, bound, folded, rewritten
and planned, as every night did before), ``kept`` loads from the plan the first ``--plans`` load
wrote. The sides alternate, ``--runs`` times each. Printed per component: wall and CPU seconds, the
child's VmHWM after the load, medians, and kept / planned (CPU), the share ``frame.estimate.pi``
takes for a night whose plans are kept (the last line: all components together).

    .venv/bin/python benchmarks/plan_cache_load.py --pipeline /tmp/sdxlfig/sdxl-turbo-uint8 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = ("text_encoder", "text_encoder_2", "unet", "vae_decoder")

CHILD = r"""
import json, sys, time
from frame.engine.model import load_model
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
source, plans = sys.argv[1], sys.argv[2] or None
before = hwm()
wall, cpu = time.perf_counter(), time.process_time()
model = load_model(source, weights="prefetch", plans=plans)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall": wall, "cpu": cpu, "hwm_mb": hwm(), "imports_mb": before, "steps": len(model.steps)}))
model.close()
"""


def load_once(source: str, plans: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", CHILD, source, plans], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", required=True, help="a pipeline folder (component/model.onnx)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    totals = {"planned": 0.0, "kept": 0.0}
    print("| component | side | wall s (median) | CPU s (median) | CPU s, runs | VmHWM MB | kept / planned (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for component in COMPONENTS:
        source = Path(args.pipeline) / component / "model.onnx"
        if not source.exists():
            continue
        with tempfile.TemporaryDirectory() as plans:
            load_once(str(source), plans)  # writes the kept plan
            sides: dict[str, list[dict]] = {"planned": [], "kept": []}
            for _ in range(args.runs):
                sides["planned"].append(load_once(str(source), ""))
                sides["kept"].append(load_once(str(source), plans))
        cpu = {side: statistics.median(r["cpu"] for r in runs) for side, runs in sides.items()}
        for side in totals:
            totals[side] += cpu[side]
        for side, runs in sides.items():
            print(f"| {component} | {side} | {statistics.median(r['wall'] for r in runs):.3f} | {cpu[side]:.3f} | "
                  + " ".join(f"{r['cpu']:.3f}" for r in runs)
                  + f" | {statistics.median(r['hwm_mb'] for r in runs):.1f} | "
                  + (f"{cpu['kept'] / cpu['planned']:.3f}" if side == "kept" else "") + " |")
    print(f"\nall components (the night's loads): planned {totals['planned']:.3f} s CPU, kept {totals['kept']:.3f} s, "
          f"kept / planned {totals['kept'] / totals['planned']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
