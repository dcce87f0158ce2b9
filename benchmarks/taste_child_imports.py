"""What the taste child's imports cost, and whether deferring ``scipy.stats`` would save any of it.

    PYTHONPATH=. python benchmarks/taste_child_imports.py [--job JOB_DIR] [--runs 3] [--ratings 12,40,150,400]

The Pi twin's taste child (``frame.worker.tastechild``) peaked at 242.5 MiB emulated, 8 MiB under the
twin's cgroup limit, and ``scipy.stats`` was the largest step of its imports (+79 MiB emulated).
scikit-learn's ``sklearn.utils.fixes`` imports it at module level and frame never calls it, so the
idea was to register it as a lazily loaded module before scikit-learn is imported. This script
measures whether that can work, each column in fresh processes (``VmHWM``, the own peak, after each
import step; the median of ``--runs``):

* ``plain`` — the imports as the taste child makes them;
* ``LazyLoader`` — ``scipy.stats`` registered first with ``importlib.util.LazyLoader`` (the standard
  library's recipe: find_spec, wrapped loader, module_from_spec, sys.modules, exec_module);
* ``on attribute`` — ``scipy.stats`` registered first as a module whose code runs on the first
  attribute it does not have (its ``__spec__``/``__path__`` are there without loading).

For each deferred column it names the line that made ``scipy.stats`` load. With ``--job`` (a job
folder with ``job.json``, ``config.yaml`` and ``taste-input.json``, e.g. one kept from
``benchmarks/worker_taste_memory.py --taste 12``) it also runs the whole child on a copy of it, plain
and ``on attribute``, and compares the child's peak and its ``taste-choice.json``.

With ``--job`` and ``--ratings N,...`` it measures what the fit itself adds as the owner rates more
pictures: the job's history is replaced by N ratings of its own candidates (seeded; the same
pictures rated more than once, as on a frame that has run for a while), and the whole child runs
with the neighbour searches' distance blocks at 4 M entries and the plot's whole grid in one call
(as before 2026-12-04), and at ``frame.taste.neighbours.BLOCK_ENTRIES`` with the grid in
``frame.taste.plot_data.GRID_CHUNK``-point chunks; both columns must write the same
``taste-choice.json``. (The plot's JSON rows, strings since the same day, are the same in both.)
These runs hide pandas (the Pi's lock has none; scikit-learn imports it when it is installed).
Results: docs/pi-twin.md, "The taste night".
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import traceback
import types
from pathlib import Path

STEPS = ("numpy", "frame.worker.tastechild", "scipy.sparse", "scipy.sparse.linalg", "scipy.stats",
         "sklearn.base", "sklearn.neighbors", "sklearn.model_selection")
MODES = ("plain", "LazyLoader", "on attribute")
OLD_BLOCK_ENTRIES = 4_000_000  # frame.taste.neighbours' distance block before 2026-12-04 (and no grid chunks)
HEAVY = "scipy.stats._distn_infrastructure"  # in sys.modules once scipy.stats's code has run


def _hwm_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))


class _OnAttribute(types.ModuleType):
    """A module whose code runs (in place) on the first attribute it does not have."""

    def __getattr__(self, name: str) -> object:
        caller = next((f for f in reversed(traceback.extract_stack()[:-1]) if "importlib" not in f.filename), None)
        where = f"{caller.filename.split('site-packages/')[-1]}:{caller.lineno} ({caller.line})" if caller else "?"
        print(json.dumps({"loaded_by": where, "attribute": name}), flush=True)
        self.__class__ = types.ModuleType
        self.__spec__.loader.exec_module(self)
        return getattr(self, name)


def _defer(name: str, mode: str) -> None:
    spec = importlib.util.find_spec(name)
    if mode == "LazyLoader":
        spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    if mode == "on attribute":
        module.__class__ = _OnAttribute
    sys.modules[name] = module
    if mode == "LazyLoader":
        spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


def child(mode: str, job: str | None, block: int | None = None) -> None:
    """One process: defer scipy.stats as ``mode`` says, then import the steps (or run the taste child);
    with ``block``, no pandas and the neighbour searches' distance blocks of that many entries (the
    old size also asks about the plot's whole grid at once)."""
    if block:
        sys.modules["pandas"] = None  # as not installed: ``import pandas`` raises ImportError
        from frame.taste import neighbours, plot_data

        neighbours.BLOCK_ENTRIES = block
        if block == OLD_BLOCK_ENTRIES:
            plot_data.GRID_CHUNK = plot_data.GRID**2
    if mode != "plain":
        import scipy  # noqa: F401 - find_spec("scipy.stats") imports the parent package anyway

        _defer("scipy.stats", mode)
    if job:
        from frame.worker import tastechild

        tastechild.main([job])
        return
    print(json.dumps({"step": "python", "mib": _hwm_mib(), "stats_ran": HEAVY in sys.modules}), flush=True)
    for step in STEPS:
        importlib.import_module(step)
        print(json.dumps({"step": step, "mib": _hwm_mib(), "stats_ran": HEAVY in sys.modules}), flush=True)


def _run(mode: str, job: str | None = None, block: int | None = None) -> list[dict]:
    command = [sys.executable, __file__, "--child", mode] + (["--job", job] if job else [])
    command += ["--block", str(block)] if block else []
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--job", help="a kept taste job folder: also run the whole child on copies of it")
    parser.add_argument("--ratings", help="with --job: comma-separated rating counts for the fit's own memory")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--block", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.job, args.block)
        return
    if args.ratings:
        if not args.job:
            parser.error("--ratings needs --job (a kept taste job folder)")
        fit_memory(Path(args.job), [int(n) for n in args.ratings.split(",")], args.runs)
        return

    runs = {mode: [_run(mode) for _ in range(args.runs)] for mode in MODES}
    print(f"own peak (VmHWM, MiB, median of {args.runs}) after each import; * = scipy.stats's code has run;")
    print("the deferred columns import scipy (and numpy) before their first row, to find scipy.stats's spec")
    print(f"{'step':26}" + "".join(f"{mode:>16}" for mode in MODES))
    for step in ("python",) + STEPS:
        cells = []
        for mode in MODES:
            rows = [r for run in runs[mode] for r in run if r.get("step") == step]
            ran = "*" if rows[0]["stats_ran"] else " "
            cells.append(f"{statistics.median(r['mib'] for r in rows):15.1f}{ran}")
        print(f"{step:26}" + "".join(cells))
    for mode in MODES[1:]:
        cause = next((r for r in runs[mode][0] if "loaded_by" in r), None)
        print(f"{mode}: scipy.stats ran " + (f"on .{cause['attribute']} from {cause['loaded_by']}" if cause
                                             else "when imported (the import statement reads its __spec__)"))

    if args.job:
        print("\nthe whole taste child on a copy of", args.job)
        for mode in ("plain", "on attribute"):
            peaks, choices = [], set()
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    for name in ("job.json", "config.yaml", "taste-input.json"):
                        shutil.copy(Path(args.job) / name, tmp)
                    lines = _run(mode, tmp)
                    peaks.append(next(r["peak_rss_mb"] for r in lines if "peak_rss_mb" in r))
                    choices.add(hashlib.sha256((Path(tmp) / "taste-choice.json").read_bytes()).hexdigest()[:12])
            cause = next((r for r in lines if "loaded_by" in r), None)
            note = f"; scipy.stats ran on .{cause['attribute']} from {cause['loaded_by']}" if cause else ""
            print(f"{mode:13} own peak {statistics.median(peaks):.1f} MiB (runs {peaks}), "
                  f"taste-choice.json {sorted(choices)}{note}")


def rated_job(source: Path, target: Path, count: int) -> None:
    """A copy of the taste job ``source`` whose history is ``count`` ratings of its own candidates:
    drawn with a seeded generator, liked when the theme is one of every other candidate's, flipped
    one time in five (an owner is not consistent)."""
    from frame.statefile import read_json, write_json

    job = read_json(source / "job.json")
    rng = random.Random(count)
    liked = {item["theme"] for item in job["candidates"][::2]}
    history = []
    for i in range(count):
        item = rng.choice(job["candidates"])
        value = 1 if (item["theme"] in liked) != (rng.random() < 0.2) else -1
        history.append({"id": i + 1, "origin": "theme", "prompt": item["prompt"], "rating_kind": "thumb",
                        "rating_value": value, "style": item["style"], "theme": item["theme"],
                        "why": {"candidate": None}})
    write_json(target / "job.json", {**job, "history": history})
    for name in ("config.yaml", "taste-input.json"):
        shutil.copy(source / name, target)


def fit_memory(source: Path, counts: list[int], runs: int) -> None:
    """The whole child's own peak on jobs with ``counts`` ratings, old and current search sizes."""
    from frame.taste.neighbours import BLOCK_ENTRIES
    from frame.taste.plot_data import GRID_CHUNK

    blocks = {f"{OLD_BLOCK_ENTRIES:,} dists, whole grid": OLD_BLOCK_ENTRIES,
              f"{BLOCK_ENTRIES:,} dists, grid by {GRID_CHUNK}": BLOCK_ENTRIES}
    print(f"the whole taste child on {source} with N ratings, no pandas: own peak (VmHWM, MiB) and CPU s, "
          f"median of {runs}")
    print(f"{'ratings':>8}" + "".join(f"{name:>34}" for name in blocks) + "   same taste-choice.json")
    for count in counts:
        cells, choices = [], set()
        for block in blocks.values():
            peaks, cpus = [], []
            for _ in range(runs):
                with tempfile.TemporaryDirectory() as tmp:
                    rated_job(source, Path(tmp), count)
                    report = next(r for r in _run("plain", tmp, block) if "peak_rss_mb" in r)
                    peaks.append(report["peak_rss_mb"])
                    cpus.append(report["cpu_s"])
                    choices.add(hashlib.sha256((Path(tmp) / "taste-choice.json").read_bytes()).hexdigest())
            cells.append(f"{statistics.median(peaks):13.1f} MiB {statistics.median(cpus):7.2f} s CPU")
        print(f"{count:>8}" + "".join(f"{cell:>34}" for cell in cells) + f"   {'yes' if len(choices) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
