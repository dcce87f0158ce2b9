"""Nights that learn this device's step time (``frame.estimate.step_history``) end to end: the render
worker times tonight's steps and keeps them, the next night's step choice uses them, and a device
slower than the Pi projection says so in the night's log and on the phone page. Demo model, the step
choice in this process (the child's work), the render in this process."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from frame.daemon.jobs.night import write_job_files
from frame.diffusion import load_pipeline
from frame.estimate import configured, step_history
from frame.estimate.choice import ESTIMATE_MARGIN, choose_steps
from frame.estimate.machine import Throughput
from frame.models import demo_model_path
from frame.web.present import progress_view
from frame.worker import render
from frame.worker import step_choice as nightly
from frame.worker.events import StageEvent, event_line, parse_event
from frame.worker.records import JobCandidate, RenderJob
from frame.worker.render import run_render
from tests.daemon.conftest import make_config

RATES = Throughput(2e9, 4e9, 1e-5, {"conv": 2e9, "matmul": 2e9, "attention": 2e9}, read_bytes=50e6)
HOUR = 3600.0


def _config(state: Path):
    return make_config(state, model={"source": "demo", "size": "64x64", "steps": 3},
                       display={"panel": "virtual", "size": "80x48"})


def _night(tmp_path: Path, name: str, monkeypatch, deadline_in: float = HOUR):
    """(tonight's choice, the events the render emitted, the state folder) for a night of the demo model."""
    monkeypatch.setattr(configured, "measure_throughput", lambda *args, **kwargs: RATES)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    config = _config(state)
    job = RenderJob(render_id=1, render_kind="night", state_dir=state, seed=7, deadline=time.time() + deadline_in,
                    candidates=(JobCandidate(prompt="a red fox", theme="a red fox", style="", weight=1.0,
                                             origin="theme"),))
    job_dir = tmp_path / name
    job_dir.mkdir()
    write_job_files(job_dir, config, job)
    nightly.night_steps(config, load_pipeline(demo_model_path()), (64, 64), job.deadline, job_dir, state)
    events: list = []
    run_render(job, config, job_dir, events.append)
    return nightly.saved_choice(job_dir), events, state, job_dir


def test_a_first_night_chooses_as_before_and_keeps_its_measured_steps(tmp_path, monkeypatch):
    choice, events, state, job_dir = _night(tmp_path, "first", monkeypatch)
    saved = nightly.read_json(job_dir / nightly.CHOICE_FILE)
    fixed = choice.projected_seconds - choice.steps * saved["estimated_step_seconds"]
    before = choose_steps(choice.configured, choice.minimum, fixed, saved["estimated_step_seconds"],
                          choice.available_seconds)
    assert (choice.steps, choice.margin, choice.fixed_margin, choice.learned_nights, choice.slow) == \
        (before.steps, ESTIMATE_MARGIN, None, 0, "")
    assert "earlier night" not in choice.sentence()
    assert not any("this device measured" in n for n in configured.estimate_config(
        _config(tmp_path / "empty"), size=(64, 64), alternative=False).estimate.notes)  # nothing kept: no note
    kept = step_history.load(state)
    assert list(kept) == [saved["history_key"]]
    (night,) = kept[saved["history_key"]]
    assert night.steps == 3 and 0 < night.step_seconds < 60  # the render's own three steps, timed


def test_the_next_nights_use_the_measured_steps(tmp_path, monkeypatch):
    _, _, state, job_dir = _night(tmp_path, "first", monkeypatch)
    key = nightly.read_json(job_dir / nightly.CHOICE_FILE)["history_key"]
    for now in (1.0, 2.0):
        step_history.record(state, key, [step_history.load(state)[key][-1].step_seconds], now=time.time() + now)
    choice, _, _, _ = _night(tmp_path, "fourth", monkeypatch)
    assert choice.learned_nights == 3 and choice.fixed_margin == ESTIMATE_MARGIN
    assert step_history.MARGIN_FLOOR <= choice.margin <= ESTIMATE_MARGIN
    assert "(steps timed as on 3 earlier nights)" in choice.sentence()
    assert len(step_history.load(state)[key]) == 4


def test_a_device_slower_than_the_pi_projection_says_so_in_the_log_and_on_the_phone(tmp_path, monkeypatch, caplog):
    def slow_steps(relay, report, now):  # injected: every step of the real render measured at a minute
        if report.phase == "unet" and report.step_done:
            relay.step_seconds.append(60.0)

    monkeypatch.setattr(render.ProgressRelay, "_time_step", slow_steps)
    with caplog.at_level(logging.INFO):
        first, _, state, job_dir = _night(tmp_path, "first", monkeypatch, deadline_in=10 * HOUR)
    assert first.slow == ""  # nothing measured before tonight
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("took 1 min 00 s per step tonight" in w and "Raspberry Pi Zero 2 W" in w for w in warnings)
    assert any("tonight's 3 measured steps took 60 s each" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="frame.worker.render"):
        choice, events, _, _ = _night(tmp_path, "second", monkeypatch, deadline_in=10 * HOUR)
    assert "took 1 min 00 s per step on earlier nights" in choice.slow
    assert "runs slower than the estimate's Pi figures" in choice.slow
    assert choice.learned_nights == 1
    assert any(choice.slow in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    stage = next(e for e in events if isinstance(e, StageEvent) and e.step_choice)
    line = parse_event(event_line(stage))  # as the daemon reads it from the worker's protocol line
    shown = progress_view({"render": line.progress()})["step_choice"]
    assert shown.endswith(choice.slow) and shown.count(";") == 1  # one plain sentence after the choice's
    estimate = configured.estimate_config(_config(state), size=(64, 64), alternative=False)  # frame estimate
    notes = estimate.estimate.notes
    assert any("this device measured 1 min 00 s per step on 2 earlier nights at these settings" in n for n in notes)
    assert any("took 1 min 00 s per step on earlier nights" in n for n in notes)


def test_a_damaged_history_costs_no_night(tmp_path, monkeypatch, caplog):
    state = tmp_path / "state"
    state.mkdir()
    (state / step_history.FILE).write_bytes(b"\x00garbage")
    choice, _, state, _ = _night(tmp_path, "first", monkeypatch)
    assert choice.learned_nights == 0 and choice.margin == ESTIMATE_MARGIN
    assert len(next(iter(step_history.load(state).values()))) == 1  # rebuilt by tonight's steps
