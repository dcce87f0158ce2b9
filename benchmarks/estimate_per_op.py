"""The estimate's compute per engine step beside the engine's measured time of that step, by kind.

One model, one process: ``count_graph`` and ``measure_throughput`` (per CPU second, the model's own
heaviest signatures, as ``frame estimate`` does), then the model run by the engine (one warm-up run,
then ``--runs`` timed ones; ``--items 2`` runs both guidance passes through ``run_shared`` as the
render does) with every step timed in process CPU time (all threads) and page faults; ``--repeat N``
measures and runs N times alternately (a shared machine's load drifts) and reports medians. Rows
group the steps by what the estimate prices differently: each compute kind by op and weight storage,
and the memory-bound ops by op type. ``est`` is ``timing.step_compute`` for the items.

    .venv/bin/python benchmarks/estimate_per_op.py /work/cache/sd15-full/unet/model.onnx --feeds unet --items 2
    .venv/bin/python benchmarks/estimate_per_op.py PIPE/vae_decoder/model.onnx --feeds vae
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def feeds_for(kind: str, latent: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    if kind == "unet":
        return {"sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32),
                "timestep": np.array([999.0], np.float32),
                "encoder_hidden_states": rng.standard_normal((1, 77, 768)).astype(np.float32)}
    if kind == "vae":
        return {"latent_sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32)}
    raise SystemExit(f"unknown --feeds {kind!r}")


def category(step) -> str:  # noqa: ANN001 - a StepCost
    """What the estimate prices a step by: its signature's op and storage, else its op type."""
    sig = step.signature
    if sig is not None and any(step.engine_macs):
        return f"{sig.op}/{sig.storage}"
    return step.op_type


def measure_steps(path: str, feeds: list[dict], runs: int) -> tuple[list[list[float]], dict]:
    """Per plan step: [cpu seconds, wall seconds, minor faults] per run (mean), and run totals."""
    from frame.engine import load_model
    from frame.engine.executor import Executor

    model = load_model(path)
    steps = model.steps
    index = {id(s): i for i, s in enumerate(steps)}
    per = [[0.0, 0.0, 0] for _ in steps]
    # every way the executor runs a step: alone, row-streamed for all items, or with its weight decoded once
    # for all items (a guided run's fp16/8-bit products: not timed before 2026-12-04, so they read 0 s)
    run_step, run_rows, run_decoded = Executor._run_step, Executor._run_rows_shared, Executor._run_decoded_shared

    depth = [0]

    def timed(fn):
        def wrapper(self, step, *args, **kwargs):
            c0, w0 = time.process_time(), time.perf_counter()
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            depth[0] += 1
            try:
                result = fn(self, step, *args, **kwargs)
            finally:
                depth[0] -= 1
            row = per[index[id(step)]] if id(step) in index and not depth[0] else None  # outermost call only
            if row is not None:
                row[0] += time.process_time() - c0
                row[1] += time.perf_counter() - w0
                row[2] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            return result
        return wrapper

    def run_once():
        return model.run(feeds[0]) if len(feeds) == 1 else model.run_shared(feeds)

    run_once()  # warm-up
    Executor._run_step, Executor._run_rows_shared = timed(run_step), timed(run_rows)
    Executor._run_decoded_shared = timed(run_decoded)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        for _ in range(runs):
            run_once()
    finally:
        Executor._run_step, Executor._run_rows_shared = run_step, run_rows
        Executor._run_decoded_shared = run_decoded
    after = resource.getrusage(resource.RUSAGE_SELF)
    model.close()
    totals = {"cpu": (time.process_time() - c0) / runs, "wall": (time.perf_counter() - w0) / runs,
              "sys": (after.ru_stime - usage.ru_stime) / runs,
              "faults": (after.ru_minflt - usage.ru_minflt) / runs}
    return [[r[0] / runs, r[1] / runs, r[2] / runs] for r in per], totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--feeds", choices=("unet", "vae"), default="unet")
    parser.add_argument("--latent", type=int, help="latent size (default 64 for unet, 32 for a vae tile)")
    parser.add_argument("--items", type=int, default=1, help="inputs run through run_shared (2: guidance)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--measure-seconds", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=1, help="probes then model, this many times (medians)")
    parser.add_argument("--top", type=int, default=0, help="also list the N steps with the largest gap")
    parser.add_argument("--by-signature", metavar="OP", help="also list the steps of one signature op (norm_conv, ...)")
    args = parser.parse_args()
    from frame.estimate.counting import count_graph
    from frame.estimate.machine import component_leaders, heaviest_signatures, measure_throughput
    from frame.estimate.timing import step_compute

    latent = args.latent or (64 if args.feeds == "unet" else 32)
    feeds = [feeds_for(args.feeds, latent, seed) for seed in range(args.items)]
    count = count_graph(args.model, {k: v.shape for k, v in feeds[0].items()})
    weighted = [(count.steps, args.items)]
    estimates, measures = [], []
    for _ in range(args.repeat):  # probes and model alternately: a shared machine's load drifts
        rates = measure_throughput(heaviest_signatures(weighted), budget_seconds=args.measure_seconds, cpu=True,
                                   required=component_leaders(weighted)).within(count.steps)
        estimates.append([step_compute(s, rates, args.items) for s in count.steps])
        measures.append(measure_steps(args.model, feeds, args.runs))
    estimated = [statistics.median(values) for values in zip(*estimates)]
    measured = [[statistics.median(v) for v in zip(*per_step)] for per_step in zip(*(m[0] for m in measures))]
    totals = {k: statistics.median(m[1][k] for m in measures) for k in measures[0][1]}
    if len(measured) != len(count.steps):
        raise SystemExit(f"the count has {len(count.steps)} steps, the engine's plan {len(measured)}")
    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0, 0.0])
    for step, est, (cpu, _, faults) in zip(count.steps, estimated, measured):
        row = rows[category(step)]
        row[0] += 1
        row[1] += est
        row[2] += cpu
        row[3] += faults
        row[4] += (step.kept_bytes - 0) / 2**20
        row[5] += sum(step.engine_macs) * args.items / 1e9
    print(f"{args.model} at {dict((k, v.shape) for k, v in feeds[0].items())}, items {args.items}, "
          f"runs {args.runs}, repeats {args.repeat}; probes {rates.seconds:.1f} s")
    print("| steps | n | est CPU s | measured CPU s | measured/est | page faults | G MACs |")
    print("|---|---|---|---|---|---|---|")
    for name, (n, est, cpu, faults, _, gmacs) in sorted(rows.items(), key=lambda kv: -kv[1][2]):
        if cpu > 0.01 or est > 0.01:
            print(f"| {name} | {n} | {est:.2f} | {cpu:.2f} | {cpu / est if est else float('inf'):.2f} | "
                  f"{faults:.0f} | {gmacs:.1f} |")
    est_total, cpu_total = sum(estimated), sum(m[0] for m in measured)
    print(f"total: estimate {est_total:.2f} CPU-s, steps {cpu_total:.2f} CPU-s ({cpu_total / est_total - 1:+.0%}); "
          f"whole run {totals['cpu']:.2f} CPU-s ({totals['sys']:.2f} sys, {totals['faults']:.0f} minor faults), "
          f"{totals['wall']:.2f} s wall")
    if args.by_signature:
        per_sig: dict = defaultdict(lambda: [0, 0.0, 0.0])
        for step, est, (cpu, _, _) in zip(count.steps, estimated, measured):
            if step.signature is not None and step.signature.op == args.by_signature:
                row = per_sig[step.signature]
                row[0] += 1
                row[1] += est
                row[2] += cpu
        for sig, (n, est, cpu) in sorted(per_sig.items(), key=lambda kv: -kv[1][2]):
            probed = "probed" if sig in rates.signature_macs else "op average"
            print(f"  {sig.shapes} {dict(sig.attrs)} n={n}: est {est:.3f} measured {cpu:.3f} "
                  f"({cpu / est:.2f}x, {probed})")
    if args.top:
        gaps = sorted(range(len(measured)), key=lambda i: estimated[i] - measured[i][0])[:args.top]
        for i in gaps:
            s = count.steps[i]
            print(f"  step {i} {category(s)} {s.signature.shapes if s.signature else ''}: est {estimated[i]:.3f} "
                  f"measured {measured[i][0]:.3f} faults {measured[i][2]:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
