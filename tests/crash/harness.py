"""The crash-consistency harness: record a night, cut the power after every call, check each disk.

1. ``scenario.setup`` writes the state before the night (synced); the night runs under strace
   (``strace.record``) as its own process tree: the scenario driver and the render workers it starts.
2. Pass one replays the calls through ``fsmodel.Model`` to build the ledger of every file version and
   when its writer returned (``checks.FileLedger``).
3. Pass two replays them again; after every call that changed the traced folders it takes the crash
   images of each model (``kill``, ``lost``, ``meta``; ``torn`` in the middle of every write) and checks
   the file rules on each. Each distinct image is then put on disk where the state folder was and the
   daemon's start path runs on it (``checks.run_start``); its results are checked against what had been
   committed before the cut (``checks.Expectations``). The start runs once per image the start path
   cannot tell apart (``checks.crash_view``: the same logical store content after SQLite's own
   recovery, the same bytes in every other file it reads, the same folders); its result is checked
   against every cut point that produced such an image.

Findings are grouped by message, each with the first cut that showed it and how many cuts did.
"""

from __future__ import annotations

import copy
import os
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.crash import checks, scenario
from tests.crash.fsmodel import Model
from tests.crash.strace import Call, marks, parse, record

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("kill", "lost", "meta")


@dataclass
class Report:
    calls: int = 0
    cut_points: int = 0
    images: int = 0
    starts: int = 0
    record_seconds: float = 0.0
    replay_seconds: float = 0.0
    per_model: Counter = field(default_factory=Counter)
    findings: dict[str, tuple[str, int]] = field(default_factory=dict)

    def add(self, message: str, where: str) -> None:
        first, count = self.findings.get(message, (where, 0))
        self.findings[message] = (first, count + 1)

    def summary(self) -> str:
        lines = [f"{self.calls} calls in scope, {self.cut_points} cut points, {self.images} distinct images "
                 f"({dict(self.per_model)}), {self.starts} daemon starts; recorded in {self.record_seconds:.1f} s, "
                 f"replayed and checked in {self.replay_seconds:.1f} s"]
        for message, (first, count) in sorted(self.findings.items(), key=lambda item: -item[1][1]):
            lines.append(f"  [{count}x] {message}\n        first at {first}")
        return "\n".join(lines)


def _contents(db: Path) -> checks.Expected:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return checks.Expected({r[0] for r in conn.execute("SELECT id FROM pictures")},
                               dict(conn.execute("SELECT id, picture_id FROM ratings").fetchall()),
                               {r[0] for r in conn.execute("SELECT id FROM renders WHERE status != 'running'")})
    finally:
        conn.close()


def describe(call: Call) -> str:
    parts = [str(getattr(a, "path", None) or a) for a in call.args[:2]]
    return f"{call.name}({', '.join(parts)})"


def record_night(workdir: Path, kind: str) -> tuple[list[Call], Model, checks.Expectations, float]:
    """Set up, record, parse: the calls, the model of the disk before them, the expectations."""
    state, out = workdir / "state", workdir / "out"
    scenario.setup(state)
    out.mkdir(parents=True, exist_ok=True)
    (out / "owner.png").write_bytes(scenario._png((1, 2, 3)))
    os.sync()
    initial = _contents(state / "frame.db")
    before = Model([state, out])
    log = workdir / "trace.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    done = record([sys.executable, "-m", "tests.crash.scenario", kind, str(state), str(out)], log, env=env, cwd=ROOT)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"the recorded {kind} night failed ({done.returncode}):\n{done.stderr[-4000:]}")
    calls = parse(log)
    return calls, before, checks.Expectations(marks(calls), initial, initial), seconds


def run(workdir: Path, kind: str, models: tuple[str, ...] = MODELS, torn: bool = True) -> Report:
    report = Report()
    calls, before, expectations, report.record_seconds = record_night(workdir, kind)
    started = time.monotonic()
    state, out = workdir / "state", workdir / "out"
    config = scenario.scenario_config(state, kind, listen="127.0.0.1:0")

    ledger_model = copy.deepcopy(before)
    initial = ledger_model.image("kill").files
    ledger = checks.FileLedger(initial)
    for index, call in enumerate(calls):
        for effect in ledger_model.apply(index, call):
            ledger.add(effect)
    ledger.finish()
    for message in ledger.trace_findings():
        report.add(message, "the recorded trace")

    model = copy.deepcopy(before)
    results: dict[tuple, checks.ProbeResult] = {}
    logical: dict[tuple, checks.ProbeResult] = {}
    pending_torn: list = []

    def on_write(node, offset, data) -> None:
        if torn:
            pending_torn.append(model.torn_image(node, offset, data))

    model.on_write = on_write
    for index, call in enumerate(calls):
        pending_torn.clear()
        effects = model.apply(index, call)
        if not effects:
            continue
        report.calls += 1
        images = [(index, image) for image in pending_torn]
        images += [(index + 1, model.image(name)) for name in models]
        for k, image in images:
            report.cut_points += 1
            where = f"call {index} {describe(call)} [{image.key[0]}]"
            for message in ledger.check(k, image):
                report.add(message, where)
            result = results.get(image.key)
            if result is None:
                report.images += 1
                report.per_model[image.key[0]] += 1
                view = checks.crash_view(image, state, workdir / "scratch")
                result = logical.get(view.key)
                if result is None:
                    result = checks.run_start(config, image, [state, out], view)
                    logical[view.key] = result
                    report.starts += 1
                results[image.key] = result
            for message in checks.probe_findings(result, expectations.at(k)):
                report.add(message, where)
    report.replay_seconds = time.monotonic() - started
    return report
