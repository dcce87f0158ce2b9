"""Where one model evaluation spends its time, per op type: frame's engine beside onnxruntime.

Dev-only (onnxruntime). Each runtime runs in its own subprocess: one warm-up run, then ``--runs``
profiled runs. frame: every executor step is timed (wall, and process CPU time: all threads, so
BLAS workers and the weight prefetch thread count); onnxruntime: its own profiler
(``enable_profiling``), whose per-node kernel times are wall times (CPU ≈ wall × threads busy).
Prints one Markdown table by op type (frame's fused steps under their own names: SlicedAttention,
SiLU, UpsampleConv, ConvAffine, ...), with the whole run's wall and CPU seconds of each side. frame's
"cores busy" is CPU / wall of the op type (1.0 = one core while the others wait) and "idle core-s"
is threads × wall − CPU: the op types to split over the cores next are those with the most of it.
On a loaded machine both read as serial; "off-caller CPU %" does not: the share of the op's CPU
time spent outside the thread that runs the step (time.thread_time), i.e. on the pool's threads
(and the weight prefetch thread). A kernel split evenly over two threads shows about 50 %. "pool
CPU %" counts the pool's tasks alone (not the prefetch thread); from it the last line derives the
parallel fraction of frame's step CPU time and the speedup it allows on 2 and 4 cores (Amdahl).

    .venv/bin/python benchmarks/engine_profile.py MODEL.onnx --feeds unet-sd15 [--runs 1]
    .venv/bin/python benchmarks/engine_profile.py MODEL.onnx --feeds unet-sdxl --latent 64
    .venv/bin/python benchmarks/engine_profile.py VAE_DECODER.onnx --feeds vae-decoder --latent 64

Run onnxruntime on big models under ``flock /work/locks/bigmem.lock`` (``--only frame`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def feeds_for(kind: str, latent: int):
    import numpy as np

    rng = np.random.default_rng(0)
    if kind in ("unet-sd15", "unet-sdxl"):
        context = 768 if kind == "unet-sd15" else 2048
        feeds = {"sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32),
                 "timestep": np.array([999.0], np.float32),
                 "encoder_hidden_states": rng.standard_normal((1, 77, context)).astype(np.float32)}
        if kind == "unet-sdxl":
            feeds["text_embeds"] = rng.standard_normal((1, 1280)).astype(np.float32)
            feeds["time_ids"] = np.array([[latent * 8, latent * 8, 0, 0, latent * 8, latent * 8]], np.float32)
        return feeds
    if kind == "vae-decoder":
        return {"latent_sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32)}
    raise SystemExit(f"unknown --feeds {kind!r}")


def _vmhwm_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def profile_frame(path: str, feeds: dict, runs: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from frame.engine import blas_threads, load_model
    from frame.engine.executor import Executor
    from frame.engine.ops import blocks

    pool_cpu = _time_pool_tasks(blocks)
    model = load_model(path)
    model.run(feeds)  # warm-up: page cache, allocator, thread pools
    wall: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    caller: dict[str, float] = defaultdict(float)
    pooled: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    faults: dict[str, int] = defaultdict(int)
    original = Executor._run_step

    def timed(self, step, env, held=None):
        start, start_cpu, start_own = time.perf_counter(), time.process_time(), time.thread_time()
        start_pool = pool_cpu[0]
        start_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        original(self, step, env, held)
        op = step.node.op_type
        wall[op] += time.perf_counter() - start
        cpu[op] += time.process_time() - start_cpu
        caller[op] += time.thread_time() - start_own
        pooled[op] += pool_cpu[0] - start_pool
        faults[op] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start_faults
        count[op] += 1

    Executor._run_step = timed
    totals = []
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        model.run(feeds)
        totals.append((time.perf_counter() - start, time.process_time() - start_cpu))
    Executor._run_step = original
    return {"ops": {op: [wall[op] / runs, cpu[op] / runs, count[op] // runs, faults[op] // runs, caller[op] / runs,
                         pooled[op] / runs]
                    for op in wall},
            "total": [sum(t[0] for t in totals) / runs, sum(t[1] for t in totals) / runs],
            "threads": blas_threads.shared().compute_threads(), "peak_mb": _vmhwm_mb(), **_usage_since(usage, runs)}


def _time_pool_tasks(blocks) -> list[float]:  # noqa: ANN001
    """Count the CPU time (time.thread_time) of every task the engine hands to its core pool; returns
    the running total (a one-item list). Pool tasks finish before the step that made them does."""
    import threading

    real, total, lock = blocks._executor, [0.0], threading.Lock()

    def timed(fn):
        def task():
            start = time.thread_time()
            try:
                fn()
            finally:
                with lock:
                    total[0] += time.thread_time() - start
        return task

    class Timed:
        def submit(self, fn):
            return real().submit(timed(fn))

    blocks._executor = Timed
    return total


def _usage_since(before, runs: int) -> dict:
    """User and system CPU seconds and page faults per run since ``before`` (getrusage)."""
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": (after.ru_utime - before.ru_utime) / runs, "sys_s": (after.ru_stime - before.ru_stime) / runs,
            "minor_faults": (after.ru_minflt - before.ru_minflt) // runs}


def profile_ort(path: str, feeds: dict, runs: int, threads: int) -> dict:
    import onnxruntime as ort

    def session(profiling: bool):
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.enable_profiling = profiling
        if profiling:
            options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    sess = session(True)
    sess.run(None, feeds)
    totals = []
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        sess.run(None, feeds)
        totals.append((time.perf_counter() - start, time.process_time() - start_cpu))
    trace = json.loads(Path(sess.end_profiling()).read_text())
    wall: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    model_runs = [e for e in trace if e.get("name") == "model_run"]
    skip_until = model_runs[0]["ts"] + model_runs[0]["dur"] if model_runs else 0  # the warm-up run
    for event in trace:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time") or event["ts"] < skip_until:
            continue
        op = event["args"].get("op_name", "?")
        wall[op] += event["dur"] / 1e6
        count[op] += 1
    return {"ops": {op: [wall[op] / runs, None, count[op] // runs] for op in wall},
            "total": [sum(t[0] for t in totals) / runs, sum(t[1] for t in totals) / runs],
            "peak_mb": _vmhwm_mb(), **_usage_since(usage, runs)}


def _table(results: dict) -> None:
    frame, ort = results.get("frame"), results.get("onnxruntime")
    ops = sorted(set(frame["ops"] if frame else ()) | set(ort["ops"] if ort else ()),
                 key=lambda op: -max((frame or {"ops": {}})["ops"].get(op, [0])[0],
                                     (ort or {"ops": {}})["ops"].get(op, [0])[0]))
    threads = frame.get("threads", 1) if frame else 1
    print("| op | frame n | frame wall s | frame CPU s | frame CPU % | frame cores busy | frame idle core-s "
          "| frame off-caller CPU % | frame pool CPU % | frame page faults | ORT n | ORT wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    frame_cpu = frame["total"][1] if frame else 1
    for op in ops:
        f = frame["ops"].get(op) if frame else None
        o = ort["ops"].get(op) if ort else None
        cells = ([str(f[2]), f"{f[0]:.3f}", f"{f[1]:.3f}", f"{100 * f[1] / frame_cpu:.1f}",
                  f"{f[1] / max(f[0], 1e-9):.2f}", f"{max(0.0, threads * f[0] - f[1]):.3f}",
                  f"{100 * (1 - f[4] / max(f[1], 1e-9)):.0f}", f"{100 * f[5] / max(f[1], 1e-9):.0f}", str(f[3])]
                 if f else [""] * 9)
        cells += [str(o[2]), f"{o[0]:.3f}"] if o else ["", ""]
        if (f and f[1] > 0.005) or (o and o[0] > 0.005):
            print(f"| {op} | " + " | ".join(cells) + " |")
    if frame:
        idle = sum(max(0.0, threads * f[0] - f[1]) for f in frame["ops"].values())
        print(f"frame: {threads} threads, {idle:.2f} idle core-s in steps (threads x wall - CPU, summed by op type)")
        _amdahl(frame["ops"], threads)
    print("load average:", " ".join(open("/proc/loadavg").read().split()[:3]))
    for name, r in results.items():
        print(f"{name}: {r['total'][0]:.2f} s wall, {r['total'][1]:.2f} CPU-s per run (user {r['user_s']:.2f}, "
              f"sys {r['sys_s']:.2f}, {r['minor_faults']} minor page faults), VmHWM {r['peak_mb']:.0f} MB")


def _amdahl(ops: dict, threads: int) -> None:
    """The parallel fraction p of frame's step CPU time (pool tasks' CPU × threads / (threads − 1): the
    caller runs one share of every split itself) and the speedup it allows on 2 and 4 cores (Amdahl)."""
    if threads < 2:
        return
    cpu = sum(f[1] for f in ops.values())
    parallel = min(cpu, sum(f[5] for f in ops.values()) * threads / (threads - 1))
    p = parallel / max(cpu, 1e-9)
    cells = [f"{n} cores ×{1 / ((1 - p) + p / n):.2f} (efficiency {1 / ((1 - p) + p / n) / n:.2f})" for n in (2, 4)]
    print(f"frame: parallel fraction of step CPU {p:.3f}; Amdahl speedup " + ", ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--feeds", default="unet-sd15")
    parser.add_argument("--latent", type=int, default=64)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0,
                        help="threads of both runtimes (0 = their defaults: all cores)")
    parser.add_argument("--only", choices=("frame", "onnxruntime"))
    parser.add_argument("--worker", choices=("frame", "onnxruntime"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        feeds = feeds_for(args.feeds, args.latent)
        if args.worker == "frame":
            result = profile_frame(args.model, feeds, args.runs)
        else:
            result = profile_ort(args.model, feeds, args.runs, args.threads)
        print(json.dumps(result))
        return
    results = {}
    for runtime in ("onnxruntime", "frame"):
        if args.only and runtime != args.only:
            continue
        cmd = [sys.executable, __file__, args.model, "--feeds", args.feeds, "--latent", str(args.latent),
               "--runs", str(args.runs), "--threads", str(args.threads), "--worker", runtime]
        env = dict(os.environ)
        if args.threads:  # frame's threads follow BLAS's count, read when numpy loads
            env.update(OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode:
            raise SystemExit(f"{runtime} failed:\n{proc.stderr[-3000:]}")
        results[runtime] = json.loads(proc.stdout.strip().splitlines()[-1])
    _table(results)


if __name__ == "__main__":
    main()
