"""The night's short children beside the render worker (issue 27, the Pi twin), own peaks in one run.

    PYTHONPATH=. python benchmarks/step_choice_memory.py [--runs 3] [--size 256x160]

Prints the median own peak (``VmHWM`` from /proc/self/status) of:

* the step-choice child (``python -m frame.worker.step_choice``, the real one, demo model): with no
  kept measurement (it measures this machine) and with one kept in ``<state_dir>/machine.json``;
* the machine measurement's element probe alone, in a fresh interpreter, at SD 1.5's 4096 tokens
  (before the fix) and at the 1024 tokens it now streams, with its stream rate per CPU second;
* the settings check child (``python -m frame.worker.checkchild``, "config" and "prompt" jobs).

On the Pi twin the step-choice child was OOM-killed at 179.6 MiB (emulated) beside the render worker
and the daemon; docs/pi-twin.md, "The memory plan", has the budget these figures go into.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from frame.config import Config
from frame.daemon.jobs.night import write_job_files
from frame.worker.records import RenderJob
from frame.worker.shortjobs import CheckJob
from frame.worker.step_choice import night_steps_in_child, saved_peak_mb

PROBE = """
import sys, tempfile, numpy as np
from pathlib import Path
from frame.estimate import machine as m
with tempfile.TemporaryDirectory() as tmp:
    proto, feeds = m.element_probe(np.random.default_rng(0), tokens=int(sys.argv[1]))
    wall, cpu, path = m._Bench(Path(tmp), 0.5).time(proto, feeds)
    rate = m._probe_work(path, feeds)[1] / cpu
print(rate, [int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0])
"""
CHECK = ("import sys; from frame.worker.checkchild import main; main(sys.argv[1:])")


def step_choice_peaks(runs: int, size: tuple[int, int]) -> tuple[list[float], list[float]]:
    measuring, reusing = [], []
    for run in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            state = Path(tmp)
            for n, out in enumerate((measuring, reusing)):  # the first night keeps its measurement
                job = state / f"job{n}"
                job.mkdir()
                write_job_files(job, Config(state_dir=str(state)),
                                RenderJob(render_id=n + 1, render_kind="night", state_dir=state, seed=run,
                                          deadline=time.time() + 6 * 3600))
                night_steps_in_child(job, size)
                out.append(saved_peak_mb(job) or 0.0)
    return measuring, reusing


def probe_peak(tokens: int) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(tokens)], capture_output=True, text=True, check=True)
    rate, peak = done.stdout.split(maxsplit=1)
    return float(rate), float(peak.strip().strip("[]"))


def check_peak(what: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(f"state_dir: {tmp}\nmodel:\n  source: demo\n")
        job = CheckJob(config=config, what=what, cap_mb=192, prompt={"steps": 4} if what == "prompt" else None)
        done = subprocess.run([sys.executable, "-c", CHECK, json.dumps(job.to_json())], capture_output=True,
                              text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", default="256x160")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    wall0 = time.perf_counter()
    measuring, reusing = step_choice_peaks(args.runs, size)  # type: ignore[arg-type]
    print(f"step-choice child, demo model {args.size}, own peak (median of {args.runs}):")
    print(f"  measuring this machine: {statistics.median(measuring):7.1f} MiB  {measuring}")
    print(f"  reusing machine.json:   {statistics.median(reusing):7.1f} MiB  {reusing}")
    print("element probe alone, fresh interpreter (median of runs): stream rate per CPU second, own peak")
    for tokens in (4096, 1024):
        figures = [probe_peak(tokens) for _ in range(args.runs)]
        print(f"  {tokens:>5} tokens: {statistics.median(r for r, _ in figures) / 1e9:5.1f} GB/s, "
              f"{statistics.median(p for _, p in figures):7.1f} MiB")
    for what in ("config", "prompt"):
        peaks = [check_peak(what) for _ in range(args.runs)]
        print(f"check child ({what}): {statistics.median(peaks):7.1f} MiB  {peaks}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"({time.perf_counter() - wall0:.0f} s wall, {children.ru_utime + children.ru_stime:.0f} s CPU in the "
          f"children, {time.process_time():.1f} s here)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
