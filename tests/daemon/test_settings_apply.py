"""Settings from the phone in the running daemon: checked per field, saved as a diff, taken over
without a restart (schedule, panel options), a restart asked for cleanly, and a corrupt
settings.yaml set aside at start."""

from __future__ import annotations

import dataclasses
import time

import yaml

from frame.config import owner
from frame.config.loader import resolve
from frame.daemon.live_settings import RESTART_EXIT_CODE
from frame.daemon.service import Daemon
from frame.daemon.settings import SettingsEditor
from tests.daemon.conftest import add_picture, clock
from tests.daemon.fakesupervisor import FakeSupervisor

RENDER_AT = clock(180)  # no night is open while the tests run: nothing renders by itself


def _config_file(tmp_path, extra: str = "") -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nweb:\n  token: test-token-123456\n"
                    f"schedule:\n  timezone: UTC\n  render_at: '{RENDER_AT}'\n  deadline: '{clock(240)}'\n"
                    f"  show_at: '{clock(250)}'\n"
                    + extra, encoding="utf-8")
    (tmp_path / "state").mkdir(exist_ok=True)
    return str(path)


def test_problems_come_back_per_field_and_nothing_is_saved(tmp_path):
    editor = SettingsEditor(_config_file(tmp_path), environ={})
    proposal = editor.propose({"schedule.render_at": "25:61", "display.saturation": 3.0,
                               "model.sampler": "eular_a", "display.dither": "atkinson"})
    assert not proposal.ok
    assert set(proposal.problems) == {"schedule.render_at", "display.saturation", "model.sampler"}
    assert "did you mean 'euler_a'" in proposal.problems["model.sampler"][0]
    assert not owner.settings_path(tmp_path / "state").exists()


def test_only_values_that_differ_from_the_layers_below_are_written(tmp_path):
    editor = SettingsEditor(_config_file(tmp_path), environ={})
    proposal = editor.propose({"schedule.render_at": "02:00", "display.fit": "contain"})
    editor.save(proposal)
    assert yaml.safe_load(owner.settings_path(tmp_path / "state").read_text()) == {
        "schedule": {"render_at": "02:00"}, "display": {"fit": "contain"}}
    editor.save(editor.propose({"schedule.render_at": RENDER_AT}))  # back to the file's value: removed
    assert yaml.safe_load(owner.settings_path(tmp_path / "state").read_text()) == {"display": {"fit": "contain"}}


def test_environment_wins_and_the_page_cannot_override_it(tmp_path):
    editor = SettingsEditor(_config_file(tmp_path), environ={"FRAME_MODEL__STEPS": "6"})
    assert editor.current()["values"]["model.steps"]["locked"]
    proposal = editor.propose({"model.steps": 10})
    assert "FRAME_MODEL__STEPS" in proposal.problems["model.steps"][0]


def test_secrets_are_never_shown_and_an_empty_answer_keeps_them(tmp_path):
    path = _config_file(tmp_path, "model:\n  token: hf_secret_value\n  source: https://user:pw@example.org/m\n")
    editor = SettingsEditor(path, environ={})
    values = editor.current()["values"]
    assert values["model.token"]["value"] == "" and values["model.token"]["set"]
    assert "pw" not in values["model.source"]["value"]
    proposal = editor.propose({"model.token": "", "model.source": values["model.source"]["value"]})
    assert proposal.ok and proposal.changed == []
    assert proposal.owner_data == {}


def _running(path: str) -> Daemon:
    """The daemon of the file at ``path``, on an ephemeral port (which the schema does not accept)."""
    config = resolve(path, {}).config
    assert not resolve(path, {}).problems.lines
    config = dataclasses.replace(config, web=dataclasses.replace(config.web, listen="127.0.0.1:0"))
    return Daemon(config, supervisor_factory=FakeSupervisor, config_path=path)


def _wait(predicate, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_saved_schedule_and_panel_option_apply_in_the_running_daemon(tmp_path, monkeypatch):
    path = _config_file(tmp_path)
    FakeSupervisor.render_status, FakeSupervisor.runs = "done", []
    daemon = _running(path)
    shown_jobs = []
    real_write = __import__("frame.daemon.jobs.night", fromlist=["write_job_files"]).write_job_files

    def spy(folder, config, job):
        shown_jobs.append((job, config.display.dither))
        return real_write(folder, config, job)

    monkeypatch.setattr("frame.daemon.jobs.night.write_job_files", spy)
    picture = add_picture(daemon.store, panel_file="x-panel.png")
    daemon.store.record_shown(picture, "night")
    try:
        daemon.start()
        assert f"T{RENDER_AT}:00" in daemon.status()["next_runs"]["night"]
        editor = SettingsEditor(path, environ={})
        render_at = clock(120)  # once: the save (checked in the check child) can take past a minute's turn
        proposal = editor.propose({"schedule.render_at": render_at, "display.dither": "atkinson"})
        editor.save(proposal)
        result = daemon.apply_settings(proposal.config)
        assert result["changed"] == {"schedule.render_at": "now", "display.dither": "now"}
        assert result["restart_needed"] == []
        assert f"T{render_at}:00" in daemon.status()["next_runs"]["night"]  # no restart
        assert set(FakeSupervisor.runs) <= {"show"}  # no render started by the change
        _wait(lambda: any(dither == "atkinson" for _, dither in shown_jobs))
        (job,) = [job for job, dither in shown_jobs if dither == "atkinson"]
        assert job.kind == "show" and job.panel is None  # shown again, prepared with the new dither
    finally:
        daemon.stop()


def test_restart_settings_are_listed_and_a_restart_exits_with_the_units_code(tmp_path, monkeypatch):
    path = _config_file(tmp_path)
    monkeypatch.setenv("INVOCATION_ID", "under-systemd")
    daemon = _running(path)
    try:
        daemon.start()
        proposal = SettingsEditor(path, environ={}).propose({"logging.level": "debug"})
        assert daemon.apply_settings(proposal.config)["restart_needed"] == ["logging.level"]
        assert daemon.settings_state()["can_restart"]
        daemon.request_restart(delay=0.01)
        assert daemon.stop_event.wait(5)
        assert daemon.exit_code == RESTART_EXIT_CODE
    finally:
        daemon.stop()


def test_frame_run_sets_a_corrupt_settings_file_aside_and_starts_on_the_layers_below(tmp_path, monkeypatch):
    import argparse

    from frame.cli import daemon as cli

    path = _config_file(tmp_path)
    owner.settings_path(tmp_path / "state").write_text("schedule: [\n")
    started = {}

    def fake_daemon(config, **kwargs):
        started.update(config=config, **kwargs)
        raise SystemExit(0)  # stop before anything runs

    monkeypatch.setattr("frame.daemon.service.Daemon", fake_daemon)
    try:
        cli.cmd_run(argparse.Namespace(config=path, debug=False))
    except SystemExit:
        pass
    assert started["config"].schedule.render_at == RENDER_AT
    assert "could not be used" in started["settings_problem"]
    assert not owner.settings_path(tmp_path / "state").exists()
    (aside,) = (tmp_path / "state").glob("settings.yaml.unusable-*")
    assert aside.read_text() == "schedule: [\n"


def test_numbers_the_scheduler_and_the_store_cannot_hold_are_refused(tmp_path):
    """``schedule.rotate_favourites_minutes: 10**20`` once passed the checks, was saved, and then crashed
    the running daemon's reschedule (OverflowError), and every later start with it. What the checks
    accept must be what the daemon can take: each of these is refused next to its field."""
    path = _config_file(tmp_path)
    editor = SettingsEditor(path, environ={})
    huge = 10 ** 20
    for key in ("schedule.rotate_favourites_minutes", "feeds.refresh_minutes", "gallery.max_pictures",
                "gallery.max_disk_mb"):
        proposal = editor.propose({key: huge})
        assert set(proposal.problems) == {key}, (key, proposal.problems)
        assert f"got {huge}" in proposal.problems[key][0]
    daemon = _running(path)
    try:
        daemon.start()
        a_year = editor.propose({"schedule.rotate_favourites_minutes": 525_600, "feeds.refresh_minutes": 525_600})
        assert a_year.ok, a_year.problems
        assert daemon.apply_settings(a_year.config)["changed"]  # the largest accepted values still schedule
        assert daemon.status()["next_runs"]["rotate"]
    finally:
        daemon.stop()
