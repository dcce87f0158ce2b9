"""Durability's cost: fsyncs per night and their time, the store at ``synchronous = FULL`` against ``NORMAL``.

    .venv/bin/python benchmarks/durability.py [--runs 5]

1. fsync census (needs strace): the crash harness's small night (``tests/crash/scenario.py``: a rating,
   a render on the demo model with retention and backup, a second rating, close) recorded under strace
   once per setting; every fsync/fdatasync on the state folder counted by what it protects, up to the
   simulated bad sector (the night itself, not the restore that follows).
2. time of the store's part of that night: the same commits (open, rating, render record, picture
   record, render finished, retention delete, backup, rating, close) on a fresh copy of the same
   state, median wall and CPU time of ``--runs`` runs per setting, on this machine's disk.
3. time of the whole night (untraced, the real worker): median wall and CPU of ``--runs`` runs.

Prints both settings side by side; docs/durability.md records the results and the choice.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = ("NORMAL", "FULL")


def _category(path: str, state: str) -> str:
    name = path[len(state):].lstrip("/") or "."
    if name.startswith("frame.db.bak"):
        return "backup"
    if name.startswith("frame.db"):
        return "store (db, WAL, journal)"
    if name.startswith("checkpoints"):
        return "job folder (files, checkpoints, folders)"
    if name.startswith("gallery"):
        return "gallery"
    return "state folder itself" if name == "." else name


def census(setting: str, workdir: Path) -> Counter:
    from tests.crash import harness

    os.environ["CRASH_HARNESS_SYNCHRONOUS"] = setting
    try:
        calls, _, _, _ = harness.record_night(workdir, "small")
    finally:
        del os.environ["CRASH_HARNESS_SYNCHRONOUS"]
    state = str(workdir / "state")
    counts: Counter = Counter()
    for call in calls:
        if call.name == "write" and call.data and b'"e": "damage"' in call.data:
            break
        if call.name in ("fsync", "fdatasync"):
            path = getattr(call.args[0], "path", None) or ""
            if path.startswith(state):
                counts[_category(path, state)] += 1
    return counts


def store_night(state: Path) -> None:
    from frame.daemon.store import gallery
    from frame.daemon.store.database import Store
    from frame.daemon.store.recovery import backup_path

    store = Store.open(state)
    store.rate(1, "thumb", -1)
    render_id = store.start_render("now", None)
    picture = store.add_picture(file=f"x-r{render_id}.png", prompt="tonight", bytes=100, seed=1)
    store.finish_render(render_id, "done", picture_id=picture)
    gallery.apply_retention(store, state, gallery.Retention(3, 100))
    store.backup(backup_path(store.path))
    store.rate(picture, "thumb", 1)
    store.close()


def time_store(setting: str, template: Path, runs: int) -> tuple[float, float]:
    from frame.daemon.store import database as store_module

    store_module.SYNCHRONOUS = setting
    walls, cpus = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(dir=template.parent) as scratch:
            state = Path(scratch) / "state"
            shutil.copytree(template, state)
            os.sync()
            wall, cpu = time.perf_counter(), time.process_time()
            store_night(state)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def time_night(setting: str, template: Path, runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CRASH_HARNESS_SYNCHRONOUS": setting}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(dir=template.parent) as scratch:
            state = Path(scratch) / "state"
            shutil.copytree(template, state)
            os.sync()
            before = os.times()
            wall = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tests.crash.scenario", "small", str(state), scratch],
                           env=env, cwd=ROOT, check=True, capture_output=True)
            after = os.times()
            walls.append(time.perf_counter() - wall)
            cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from tests.crash import scenario
    from tests.crash.strace import strace_available

    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template"
        scenario.setup(template)
        if strace_available() is None:
            counts = {s: census(s, Path(tmp) / f"census-{s}") for s in SETTINGS}
            print("fsync/fdatasync calls on the state folder during one small night (one recording each):")
            categories = sorted(set().union(*counts.values()))
            print(f"  {'what they protect':42} {'NORMAL':>7} {'FULL':>7}")
            for category in categories:
                print(f"  {category:42} {counts['NORMAL'][category]:7d} {counts['FULL'][category]:7d}")
            print(f"  {'total':42} {sum(counts['NORMAL'].values()):7d} {sum(counts['FULL'].values()):7d}")
        else:
            print(f"fsync census skipped: {strace_available()}")
        print(f"\nthe night's store operations, median of {args.runs} runs (wall / CPU):")
        results = {s: time_store(s, template, args.runs) for s in SETTINGS}
        for setting, (wall, cpu) in results.items():
            print(f"  {setting:7} {wall * 1000:8.1f} ms / {cpu * 1000:6.1f} ms")
        print(f"  FULL - NORMAL: {(results['FULL'][0] - results['NORMAL'][0]) * 1000:+.1f} ms wall")
        print(f"\nthe whole small night (real worker, demo model), median of {args.runs} runs (wall / CPU):")
        nights = {s: time_night(s, template, args.runs) for s in SETTINGS}
        for setting, (wall, cpu) in nights.items():
            print(f"  {setting:7} {wall:6.2f} s / {cpu:6.2f} s")
        print(f"  FULL / NORMAL: x{nights['FULL'][0] / nights['NORMAL'][0]:.3f} wall, "
              f"x{nights['FULL'][1] / nights['NORMAL'][1]:.3f} CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
