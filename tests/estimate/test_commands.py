"""``frame estimate`` and ``frame config check`` on the bundled demo model; the night's step choice in
the worker; the figures on the phone's pages."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from frame.cli.program import main
from frame.config import Config, WebConfig, load_config
from frame.estimate.choice import StepChoice
from frame.statefile import read_json


def test_estimate_prints_counts_memory_and_both_projections(capsys, tmp_path):
    assert main(["estimate", "--measure-seconds", "0.3", "--steps", "8", "--size", "256x256",
                 "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for expected in ("model: SD 1.5", "8 steps euler_a", "guidance 7.5: two passes per step, shared",
                     "weights read once per step", "per step:", "multiply-adds", "(UNet", "x 1)", "per night:",
                     "peak memory:", "worker limit", "guidance passes shared tonight, as the render chooses:",
                     "guidance passes one after the other instead:", "this machine:", "Raspberry Pi Zero 2 W:",
                     "SD card", "render window 01:00-07:00 (6 h 00 min)"):
        assert expected in out, expected
    saved = read_json(tmp_path / "estimate.json")
    assert saved["steps"] == 8 and saved["passes_per_step"] == 2 and saved["lines"]
    assert (saved["guidance_mode"], saved["weight_reads_per_step"], saved["batched"]) == ("shared", 1, False)


def test_estimate_json_and_bad_usage(capsys):
    assert main(["estimate", "--measure-seconds", "0.3", "--guidance", "1", "--size", "256x256", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["passes_per_step"] == 1 and figures["bytes_per_step"] > 0 and figures["seconds_pi"] > 0
    assert figures["guidance_mode"] == "none" and figures["weight_reads_per_step"] == 1
    assert main(["estimate", "--steps", "0"]) == 2
    assert "--steps must be at least 1" in capsys.readouterr().err


def test_config_check_adds_the_estimate_lines(capsys, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  steps: 4\n  size: 256x256\n", encoding="utf-8")
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    assert ": ok" in out
    assert "estimate: per step:" in out and "estimate: Raspberry Pi Zero 2 W:" in out


def test_config_check_never_fails_on_the_estimate(capsys, tmp_path, monkeypatch):
    import frame.estimate.configured as configured

    def broken(*args, **kwargs):
        raise RuntimeError("no probe today")

    monkeypatch.setattr(configured, "estimate_config", broken)
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n", encoding="utf-8")
    assert main(["config", "check", str(config)]) == 0
    assert "estimate: warning: no estimate: no probe today" in capsys.readouterr().out


# the worker's step choice -----------------------------------------------------------------------

class FakeProjection:
    def __init__(self, fixed: float, step: float, steps: int) -> None:
        self.phases = {"start": 5.0, "choose": 20.0, "text": 10.0, "unet": steps * step, "vae": fixed - 10.0}
        self.step_seconds = step

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())


class FakeEstimate:
    def __init__(self, step: float) -> None:
        from types import SimpleNamespace

        self.plan = SimpleNamespace(steps=20, min_steps=10, counted_peaks_mb=None, readahead={}, guided=True,
                                    guidance_mode="shared")
        self.here = FakeProjection(600.0, step, 20)
        self.projections = [self.here, FakeProjection(600.0, step, 20)]  # here, the Pi


@pytest.fixture
def fake_estimate(monkeypatch, in_process):
    import frame.estimate.configured as configured
    import frame.estimate.report as report

    class Calls(list):
        step = 100.0

    calls = Calls()

    def estimate(config, pipe=None, size=None, measure_seconds=4.0, **kwargs):
        calls.append(size)
        from types import SimpleNamespace

        return SimpleNamespace(estimate=FakeEstimate(calls.step))

    monkeypatch.setattr(configured, "estimate_config", estimate)
    monkeypatch.setattr(report, "to_dict",
                        lambda result, origin, config=None: {"lines": ["fake line"], "origin": origin})
    return calls


@pytest.fixture
def in_process(monkeypatch):
    """The worker runs the estimate in a child process; here in-process, so the fakes apply."""
    from frame.worker import step_choice as nightly

    def run(job_dir, size, timeout=0):
        job = read_json(job_dir / "job.json")
        choice = nightly.night_steps(load_config(None), object(), size, job["deadline"], job_dir,
                                     Path(job["state_dir"]))
        if choice is None:
            raise AssertionError("the worker asked for an estimate without a deadline")
        return choice

    monkeypatch.setattr(nightly, "night_steps_in_child", run)


def _tonight(tmp_path, deadline, emitted):
    from frame.worker.records import RenderJob, write_job
    from frame.worker.render import _steps_for_tonight

    job = RenderJob(render_id=1, render_kind="night", state_dir=tmp_path, seed=1, deadline=deadline)
    job_dir = tmp_path / "job"
    job_dir.mkdir(exist_ok=True)
    write_job(job_dir, job)
    return _steps_for_tonight(job, load_config(None), object(), (512, 512), job_dir, emitted.append)


def test_the_worker_keeps_every_step_that_fits(tmp_path, fake_estimate):
    import time

    emitted = []
    assert _tonight(tmp_path, time.time() + 6 * 3600, emitted) == 20
    assert any("all 20 steps" in (event.step_choice or "") for event in emitted)
    saved = read_json(tmp_path / "job" / "step_choice.json")
    assert saved["steps"] == 20 and saved["fits"]
    assert read_json(tmp_path / "estimate.json")["step_choice"]["steps"] == 20


def test_the_worker_renders_fewer_steps_when_the_night_is_short(tmp_path, fake_estimate, caplog):
    import time

    emitted = []
    fake_estimate.step = 200.0  # fixed part still ahead: 600 s (text 10 + vae 590)
    with caplog.at_level(logging.INFO, logger="frame.worker.render"):  # 14 steps fit; with 15 % to spare, 12
        steps = _tonight(tmp_path, time.time() + 3500, emitted)
    assert steps == 12
    assert "12 of 20 steps" in caplog.text and "to spare" in caplog.text
    assert any("12 of 20 steps" in (event.step_choice or "") for event in emitted)


def test_a_choice_saved_before_the_margin_is_read_as_it_was_made(tmp_path):
    """A render resumed after an upgrade keeps the steps its checkpoints were made with."""
    from frame.statefile import write_json
    from frame.worker.step_choice import saved_choice

    write_json(tmp_path / "step_choice.json", {"steps": 14, "configured": 20, "minimum": 10, "fits": True,
                                               "projected_seconds": 3400.0, "available_seconds": 3450.0,
                                               "sentence": "14 of 20 steps: ..."})
    choice = saved_choice(tmp_path)
    assert (choice.steps, choice.margin) == (14, 0.0)
    assert "to spare" not in choice.sentence()


def test_the_worker_keeps_the_minimum_when_nothing_fits_and_reuses_the_choice(tmp_path, fake_estimate):
    import time

    emitted = []
    fake_estimate.step = 200.0
    assert _tonight(tmp_path, time.time() + 60, emitted) == 10
    assert any("the minimum" in (event.step_choice or "") for event in emitted)
    fake_estimate.step = 1.0  # a restarted worker: the saved choice wins (checkpoints depend on it)
    assert _tonight(tmp_path, time.time() + 6 * 3600, []) == 10
    assert len(fake_estimate) == 1


def test_without_a_deadline_or_with_a_failing_estimate_the_configured_steps_run(tmp_path, monkeypatch, caplog,
                                                                               in_process):
    import frame.estimate.configured as configured

    assert _tonight(tmp_path, None, []) is None  # model.steps: the model's default
    monkeypatch.setattr(configured, "estimate_config", lambda *a, **k: (_ for _ in ()).throw(OSError("disk")))
    (tmp_path / "job" / "step_choice.json").unlink(missing_ok=True)
    with caplog.at_level(logging.WARNING):
        assert _tonight(tmp_path, 1e12, []) is None
    assert "no step estimate (disk)" in caplog.text


def test_the_job_carries_the_deadline(tmp_path):
    from frame import statefile
    from frame.daemon.jobs import night
    from frame.daemon.store.database import Store

    store = Store.open(tmp_path)
    try:
        ctx = night.RenderContext(Config(state_dir=str(tmp_path)), store, tmp_path)
        render_id = store.start_render("night", "2026-12-01")
        folder = night.ensure_job(ctx, render_id, "night", deadline=1234.5)
        assert statefile.read_json(folder / "job.json")["deadline"] == 1234.5
    finally:
        store.close()


# the phone's pages ------------------------------------------------------------------------------

def test_settings_page_shows_the_last_estimate_and_the_progress_card_the_step_choice(tmp_path):
    from frame.statefile import write_json
    from frame.web.present import progress_view
    from frame.web.settings import last_estimate

    config = Config(state_dir=str(tmp_path), web=WebConfig(token="t" * 20))
    assert last_estimate(config) is None
    choice = StepChoice(14, 20, 10, True, 3400.0, 3450.0)
    write_json(tmp_path / "estimate.json", {"made_at": 0, "origin": "tonight's render",
                                            "lines": ["per step: 803 G multiply-adds"],
                                            "step_choice": choice.to_dict()})
    shown = last_estimate(config)
    assert shown["lines"] == ["per step: 803 G multiply-adds"] and shown["origin"] == "tonight's render"
    assert "14 of 20 steps" in shown["step_choice"]
    view = progress_view({"render": {"stage": "generating", "step": 2, "steps": 14,
                                     "step_choice": choice.sentence()}})
    assert "14 of 20 steps" in view["step_choice"]


def test_config_page_renders_the_estimate_card(tmp_path):
    from frame.daemon.http.app import create_app
    from frame.daemon.store.database import Store
    from frame.statefile import write_json
    from frame.web import create_blueprint

    write_json(tmp_path / "estimate.json", {"made_at": 0, "origin": "frame estimate", "lines": ["peak memory: 289 MB"]})
    config = Config(state_dir=str(tmp_path), web=WebConfig(token="t" * 20))
    store = Store.open(tmp_path)
    try:
        app = create_app(config, store, token="t" * 20, state_dir=tmp_path)
        app.register_blueprint(create_blueprint(config, store))
        html = app.test_client().get("/config", headers={"Authorization": "Bearer " + "t" * 20}).get_data(as_text=True)
    finally:
        store.close()
    assert "Night estimate" in html and "peak memory: 289 MB" in html and "frame estimate" in html


def test_the_estimate_child_on_the_demo_model_saves_a_choice(tmp_path):
    """The real child process (python -m frame.worker.step_choice) on the bundled model: a generous
    deadline keeps every configured step; the figures land in estimate.json."""
    import time

    from frame.daemon.jobs.night import write_job_files
    from frame.worker.records import RenderJob
    from frame.worker.step_choice import night_steps_in_child

    config = Config(state_dir=str(tmp_path))
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    write_job_files(job_dir, config, RenderJob(render_id=1, render_kind="night", state_dir=tmp_path, seed=1,
                                               deadline=time.time() + 6 * 3600))
    choice = night_steps_in_child(job_dir, (256, 256), timeout=300)
    assert choice.fits and choice.steps == choice.configured == 8  # the demo model's own default
    assert read_json(tmp_path / "estimate.json")["step_choice"]["steps"] == 8
