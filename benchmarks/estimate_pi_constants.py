"""Where the Pi projection's per-op constants come from (``frame.estimate.pi``): this machine's medians.

The Raspberry Pi Zero 2 W projection is computed from counted work and fixed constants only, so it is the
same on any machine under any load (issue 28). Its op efficiencies (the share of the large-GEMM rate each
engine op reaches), the engine's fixed cost per step and the load cost per graph node were read off this
development machine once, with this script, and frozen in ``frame/estimate/pi.py``; the script prints,
for each of ``--runs`` measurements of the given model (all its step signatures probed, CPU-time rates so
a shared machine's load matters less), each op's efficiency overall and per component, the step and load
costs, and their medians, which are the constants. Run it again after engine work that changes an op's
speed (and ``benchmarks/estimate_pi_crosscheck.py`` after that).

    .venv/bin/python benchmarks/estimate_pi_constants.py --source /work/cache/sd15-full-pipeline --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(source: str, size: str, measure_seconds: float) -> dict[str, float]:
    from frame.config import load_config
    from frame.estimate.configured import estimate_config

    config = load_config(None, environ={})
    config = replace(config, model=replace(config.model, source=source, size=size, steps=10, guidance=7.0))
    result = estimate_config(config, measure_seconds=measure_seconds, cpu=True, alternative=False)
    rates, plan = result.rates, result.estimate.plan
    figures = {f"op {op}": rate / rates.gemm_macs for op, rate in rates.op_macs.items()}
    figures.update({f"kind {kind}": rate / rates.gemm_macs for kind, rate in rates.kind_macs.items()})
    for run in plan.runs:
        local = rates.within(run.count.steps)
        for op, rate in local.op_macs.items():
            figures[f"{run.name} {op}"] = rate / rates.gemm_macs
    figures["gemm G/s"] = rates.gemm_macs / 1e9
    figures["step us"] = rates.step_seconds * 1e6
    counts = {id(r.count): r.count for r in plan.runs}.values()
    figures["load us/node"] = 1e6 * sum(c.load_seconds for c in counts) / sum(c.node_count for c in counts)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="demo")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--measure-seconds", type=float, default=120.0, help="enough to probe every signature")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    runs = [one_run(args.source, args.size, args.measure_seconds) for _ in range(args.runs)]
    keys = sorted(set().union(*runs))
    print(f"{'figure':32s} " + " ".join(f"{f'run {i + 1}':>8s}" for i in range(len(runs))) + f" {'median':>8s}")
    for key in keys:
        values = [r[key] for r in runs if key in r]
        print(f"{key:32s} " + " ".join(f"{r.get(key, float('nan')):8.3f}" for r in runs)
              + f" {statistics.median(values):8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
