"""Power-cut durability of the daemon's own steps (issue 19), each pinned by a test: commits are
durable when they return, job folders are created and removed durably and in order, a render whose job
file was lost is never resumed under its id with a new seed, and housekeeping survives any SQLite error.
The crash harness (tests/crash) checks the same promises at every instant of a recorded night."""

import logging
import sqlite3

import pytest

from frame import statefile
from frame.daemon.jobs import night
from frame.daemon.service import Daemon
from frame.diffusion.resume import Checkpoint, ResumeStore
from tests.daemon.conftest import clock, make_config
from tests.daemon.fakesupervisor import FakeSupervisor
from tests.fsyncspy import record_fsyncs


def test_every_commit_is_synced_when_it_returns(store):
    assert store.query("PRAGMA synchronous")[0][0] == 2  # FULL: the WAL is synced at each commit
    assert store.query("PRAGMA journal_mode")[0][0] == "wal"


@pytest.fixture
def ctx(tmp_path, store):
    FakeSupervisor.render_status = "done"
    return night.RenderContext(make_config(tmp_path), store, tmp_path, supervisor_factory=FakeSupervisor)


def test_a_new_job_folder_reaches_the_card_before_its_files(ctx, store, monkeypatch):
    synced = record_fsyncs(monkeypatch)
    render_id = store.start_render("now", None)
    folder = night.ensure_job(ctx, render_id, "now")
    checkpoints = str(ctx.state_dir / "checkpoints")
    assert synced[:2] == [str(ctx.state_dir), checkpoints]  # after mkdir checkpoints/, mkdir render-1/
    assert synced[-1] == str(folder) and "job.json.tmp" in synced[-2]


def test_a_finished_job_folder_is_removed_durably(ctx, store, monkeypatch):
    render_id = store.start_render("now", None)
    night.ensure_job(ctx, render_id, "now")
    synced = record_fsyncs(monkeypatch)
    night.discard_job(ctx.state_dir, render_id)
    assert not night.job_dir(ctx.state_dir, render_id).exists()
    assert synced == [str(ctx.state_dir / "checkpoints")]


def test_the_diffusion_checkpoint_folder_is_made_durable(tmp_path, monkeypatch):
    import numpy as np

    synced = record_fsyncs(monkeypatch)
    ResumeStore(tmp_path / "job" / "diffusion", "hash").save(Checkpoint(1, np.zeros((1, 4, 2, 2), np.float32)))
    assert synced[:2] == [str(tmp_path), str(tmp_path / "job")]


def test_housekeeping_survives_any_sqlite_error(ctx, store, monkeypatch, caplog):
    def broken(target):
        raise sqlite3.DatabaseError("file is not a database")

    monkeypatch.setattr(store, "backup", broken)
    render_id = store.start_render("now", None)
    with caplog.at_level(logging.ERROR):
        outcome, picture_id = night.render(ctx, render_id, "now")
    assert outcome.status == "done" and store.render(render_id).status == "done"
    assert "housekeeping after render" in caplog.text
    assert not night.job_dir(ctx.state_dir, render_id).exists()


def test_a_new_render_never_reuses_a_job_folder_it_finds(ctx, store):
    """After a restore from an older backup render ids are used again; an old folder is not this job."""
    render_id = store.start_render("now", None)
    stale = night.job_dir(ctx.state_dir, render_id)
    stale.mkdir(parents=True)
    statefile.write_json(stale / "job.json", {"kind": "render", "render_id": render_id, "seed": 12345,
                                              "choice": {"prompt": "from another life"}})
    store.queue_prompt("tonight's prompt")
    outcome, picture_id = night.render(ctx, render_id, "now")
    assert store.picture(picture_id).prompt == "tonight's prompt"


def _daemon(tmp_path):
    FakeSupervisor.render_status = "done"
    FakeSupervisor.runs = []
    config = make_config(tmp_path, web={"listen": "127.0.0.1:0", "token": "test-token-123456"},
                         schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240),
                                   "show_at": clock(240)})
    return Daemon(config, supervisor_factory=FakeSupervisor)


def test_a_render_whose_job_file_was_lost_is_restarted_as_a_new_render(tmp_path, caplog):
    """The render's record was committed, the power went before its job folder reached the card."""
    daemon = _daemon(tmp_path)
    lost = daemon.store.start_render("now", None)
    try:
        with caplog.at_level(logging.WARNING):
            daemon.start()
            for thread in list(daemon._threads):
                thread.join(timeout=10)
        renders = {r.id: r for r in daemon.store.renders()}
        assert renders[lost].status == "failed" and "job file was lost" in renders[lost].error
        assert len(renders) == 2 and max(renders) != lost and renders[max(renders)].status == "done"
        assert "cannot be resumed" in caplog.text
    finally:
        daemon.stop()


def test_a_render_with_its_job_file_is_resumed_with_the_same_seed(tmp_path):
    daemon = _daemon(tmp_path)
    render_id = daemon.store.start_render("now", None)
    folder = night.job_dir(daemon.state_dir, render_id)
    folder.mkdir(parents=True)
    job = {"kind": "render", "render_kind": "now", "render_id": render_id, "state_dir": str(tmp_path),
           "seed": 4242, "choice": {"prompt": "a fox", "theme": "", "origin": "queue"}, "candidates": []}
    statefile.write_json(folder / "job.json", job)
    seen = []
    real_run = FakeSupervisor.run

    def run(self, job_dir, **kwargs):
        seen.append(statefile.read_json(job_dir / "job.json")["seed"])
        return real_run(self, job_dir, **kwargs)

    FakeSupervisor.run = run
    try:
        daemon.start()
        for thread in list(daemon._threads):
            thread.join(timeout=10)
        assert seen == [4242] and daemon.store.render(render_id).status == "done"
        assert daemon.store.picture(daemon.store.render(render_id).picture_id).seed == 4242
    finally:
        FakeSupervisor.run = real_run
        daemon.stop()


def test_leftover_job_folders_are_removed_at_start(tmp_path):
    daemon = _daemon(tmp_path)
    done = daemon.store.start_render("now", None)
    daemon.store.finish_render(done, "done")
    for name in (f"render-{done}", "render-77", "show-3-abcd1234", "info-abcd1234"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    try:
        daemon.start()
        assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == []
    finally:
        daemon.stop()


def test_the_virtual_panel_folder_is_created_durably(tmp_path, monkeypatch):
    """The panel-care record (refresh times that protect the panel) lives in it."""
    from frame.config.panels import get_panel
    from frame.display.drivers.virtual import VirtualDriver

    synced = record_fsyncs(monkeypatch)
    VirtualDriver(get_panel("virtual", "96x64", "spectra6"), tmp_path / "display").init()
    assert synced == [str(tmp_path)]
