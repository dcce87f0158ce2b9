"""Night orchestration and the daemon's decisions, in-process with a stand-in supervisor."""

import errno
import logging
import time

import pytest

from frame import statefile
from frame.daemon.http.contract import Busy
from frame.daemon.jobs import night, render_job
from frame.daemon.service import Daemon
from frame.daemon.store import gallery
from frame.web import create_blueprint
from frame.worker.records import ShowJob, read_job
from tests.daemon.conftest import add_picture, clock, make_config
from tests.daemon.fakesupervisor import FakeSupervisor

OWNER = {"Authorization": "Bearer test-token-123456"}  # every page needs the owner (issue 40)


@pytest.fixture
def ctx(tmp_path, store):
    FakeSupervisor.render_status = "done"
    return night.RenderContext(make_config(tmp_path), store, tmp_path, supervisor_factory=FakeSupervisor)


def test_render_publishes_and_cleans_up(ctx, store):
    prompt_id = store.queue_prompt("a red fox")
    render_id = store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now")
    assert outcome.status == "done"
    picture = store.picture(picture_id)
    assert picture.prompt == "a red fox" and picture.timings["total"] >= 0
    assert store.queued_prompts() == [] and store.render(render_id).status == "done"
    assert not night.job_dir(ctx.state_dir, render_id).exists()
    assert (ctx.state_dir / "frame.db.bak").exists()
    assert prompt_id


def test_queued_prompts_get_a_random_seed_stored_with_the_picture(ctx, store):
    """Like frame render's default: every job draws its own seed, and the picture records it."""
    seeds = []
    for prompt in ("a red fox", "a red fox"):
        store.queue_prompt(prompt)
        render_id = store.start_render("now", None)
        folder = night.ensure_job(ctx, render_id, "now")
        job_seed = statefile.read_json(folder / "job.json")["seed"]
        _, picture_id = night.render(ctx, render_id, "now", resume=True)
        assert store.picture(picture_id).seed == job_seed
        seeds.append(job_seed)
    assert seeds[0] != seeds[1] and all(0 <= s < 2**32 for s in seeds)


def test_job_files_hold_the_job_and_the_config_without_the_owner_token(tmp_path):
    import yaml

    config = make_config(tmp_path, web={"listen": "127.0.0.1:0", "token": "test-token-123456"})
    job = ShowJob(state_dir=tmp_path, image=tmp_path / "p.png")
    night.write_job_files(tmp_path, config, job)
    written = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert written["web"]["token"] == "" and written["web"]["listen"] == "127.0.0.1:0"
    assert statefile.read_json(tmp_path / "job.json") == {"kind": "show", "state_dir": str(tmp_path),
                                                          "image": str(tmp_path / "p.png"), "panel": None}
    assert read_job(tmp_path) == job


def test_job_is_written_once_so_restarts_render_the_same_picture(ctx, store):
    render_id = store.start_render("night", "2026-11-29")
    folder = night.ensure_job(ctx, render_id, "night")
    first = statefile.read_json(folder / "job.json")
    store.queue_prompt("added later")
    assert statefile.read_json(night.ensure_job(ctx, render_id, "night", resume=True) / "job.json") == first
    assert len(first["candidates"]) == len(ctx.config.taste.themes) * len(ctx.config.taste.styles)


def test_disk_full_while_saving_keeps_previous_picture(ctx, store, monkeypatch, caplog):
    previous = add_picture(store)
    store.record_shown(previous, "earlier")

    def full(path, data, mode=0o644):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gallery, "write_bytes_atomic", full)
    render_id = store.start_render("now", None)
    with caplog.at_level(logging.ERROR):
        outcome, picture_id = night.render(ctx, render_id, "now")
    assert picture_id is None and outcome.status == "failed"
    assert "No space left" in caplog.text and "previous picture stays shown" in caplog.text
    assert store.render(render_id).status == "failed"
    assert store.last_shown().picture_id == previous and store.count_pictures() == 1
    assert not night.job_dir(ctx.state_dir, render_id).exists()  # space given back


@pytest.fixture
def daemon(tmp_path):
    FakeSupervisor.render_status = "done"
    FakeSupervisor.runs = []
    config = make_config(tmp_path, web={"listen": "127.0.0.1:0", "token": "test-token-123456"},
                         schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240),
                                   "show_at": clock(240)})
    running = Daemon(config, supervisor_factory=FakeSupervisor)
    running.start()
    yield running
    running.stop()


def _wait(predicate, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    raise TimeoutError


def test_render_now_shows_the_new_picture_and_is_exclusive(daemon):
    daemon._render_lock.acquire()
    with pytest.raises(Busy):
        daemon.render_now()
    daemon._render_lock.release()
    daemon.render_now()
    _wait(lambda: daemon.store.last_shown() is not None)
    assert daemon.store.last_shown().reason == "new picture"
    assert daemon.status()["shown"]["picture_id"] == daemon.store.last_shown().picture_id


def test_shown_since_is_an_iso_time_before_and_after_a_restart(daemon):
    """Issue 29 item 18: /api/status's shown.since was a Unix number after a show and the store's ISO
    text after a restart."""
    from datetime import datetime

    daemon.render_now()
    _wait(lambda: daemon.store.last_shown() is not None)
    since = daemon.status()["shown"]["since"]
    assert isinstance(since, str) and datetime.fromisoformat(since).tzinfo is not None
    assert since == daemon.store.last_shown().shown_at  # what a restart reads back


def test_render_now_says_rendering_before_its_thread_runs(daemon, monkeypatch):
    """Issue 29 item 15: the status page the button leads to said "state idle" while the render thread
    was still writing the job folder; the live status now says rendering when render_now answers."""
    started = []
    monkeypatch.setattr(daemon, "_spawn", lambda name, target: started.append(target))  # the thread not yet run
    answer = daemon.render_now()
    status = daemon.status()
    assert (status["state"], status["render"]["id"], status["render"]["kind"]) == ("rendering", answer["render_id"],
                                                                                   "now")
    started[0]()  # the render thread runs to its end
    assert daemon.status()["state"] == "idle" and daemon.status()["render"] is None


def test_failed_render_falls_back_to_a_favourite(daemon):
    favourite = add_picture(daemon.store)
    daemon.store.rate(favourite, "stars", 5)
    FakeSupervisor.render_status = "deadline"
    daemon.render_now()
    _wait(lambda: daemon.store.last_shown() is not None)
    shown = daemon.store.last_shown()
    assert (shown.picture_id, shown.reason) == (favourite, "fallback")
    status = daemon.status()
    assert status["notice"].startswith("No new picture — it was not finished by the deadline")
    assert f"favourite {favourite} is shown" in status["notice"]
    assert status["notice_details"] == "the render missed its deadline"


def test_no_favourite_says_so(daemon):
    FakeSupervisor.render_status = "failed"
    daemon.render_now()
    _wait(lambda: (daemon.status()["notice"] or "").endswith("like a picture to have a favourite shown next time."))
    assert "failed" in daemon.status()["notice_details"]


def test_quiet_hours_defer_the_panel_refresh(daemon):
    picture = add_picture(daemon.store)
    daemon.config = make_config(daemon.state_dir, schedule={"quiet_hours": f"{clock(-60)}-{clock(60)}"})
    assert daemon.request_show(picture, "owner")["deferred"] == "quiet hours"
    assert daemon.status()["pending_show"] == picture and FakeSupervisor.runs == []
    daemon.config = make_config(daemon.state_dir)
    daemon._flush_pending_show()
    _wait(lambda: daemon.store.last_shown() is not None)
    assert daemon.store.last_shown().picture_id == picture


def test_rotation_cycles_favourites(daemon):
    ids = [add_picture(daemon.store) for _ in range(3)]
    for pid in (ids[0], ids[2]):
        daemon.store.rate(pid, "thumb", 1)
    shown = []
    for _ in range(3):
        count = len(daemon.store.query("SELECT * FROM shown"))
        daemon.rotate()
        _wait(lambda c=count: len(daemon.store.query("SELECT * FROM shown")) > c)
        shown.append(daemon.store.last_shown().picture_id)
    assert shown == [ids[0], ids[2], ids[0]]


def test_rotation_mixes_uploaded_photos_in_with_the_favourites(daemon):
    """An uploaded photo comes round in the rotation without being rated; unrated painted ones do not."""
    painted = [add_picture(daemon.store) for _ in range(2)]
    photo = add_picture(daemon.store, "a photo", origin=gallery.UPLOAD_ORIGIN)
    daemon.store.rate(painted[0], "stars", 5)
    assert daemon.store.rotation_ids() == [painted[0], photo]
    shown = []
    for _ in range(3):
        count = len(daemon.store.query("SELECT * FROM shown"))
        daemon.rotate()
        _wait(lambda c=count: len(daemon.store.query("SELECT * FROM shown")) > c)
        shown.append(daemon.store.last_shown().picture_id)
    assert shown == [painted[0], photo, painted[0]]


@pytest.mark.parametrize(("ids", "current", "expected"), [
    ([], None, None), ([], 4, None), ([2, 5, 9], None, 2), ([2, 5, 9], 5, 9), ([2, 5, 9], 9, 2),
    ([2, 5, 9], 6, 9), ([2, 5, 9], 100, 2)])
def test_next_in_rotation(ids, current, expected):
    from frame.daemon.service import next_in_rotation

    assert next_in_rotation(ids, current) == expected


def test_rated_uploads_stay_out_of_the_taste_history(ctx, store):
    painted = add_picture(store, "a lighthouse", theme="a lighthouse in a storm")
    photo = add_picture(store, "Grandma's garden", origin=gallery.UPLOAD_ORIGIN)
    store.rate(painted, "thumb", 1)
    store.rate(photo, "thumb", 1)
    assert [rated.id for rated in render_job.rated_history(store)] == [painted]


def _daemon(tmp_path, **schedule_fields):
    FakeSupervisor.render_status = "done"
    FakeSupervisor.runs = []
    config = make_config(tmp_path, web={"listen": "127.0.0.1:0", "token": "test-token-123456"},
                         schedule={"timezone": "UTC", **schedule_fields})
    return Daemon(config, supervisor_factory=FakeSupervisor, pages=create_blueprint)  # the phone page too


def test_missed_night_is_caught_up_at_start_and_shown_after_show_time(tmp_path):
    daemon = _daemon(tmp_path, render_at=clock(-30), deadline=clock(60), show_at=clock(-10))
    try:
        daemon.start()
        _wait(lambda: daemon.store.last_shown() is not None)
        render = daemon.store.renders(1)[0]
        assert (render.kind, render.status) == ("night", "done") and render.night
        assert daemon.store.last_shown().reason == "new picture"
        daemon.nightly()  # the night already has its picture: no second render
        assert len(daemon.store.renders()) == 1
    finally:
        daemon.stop()


def test_picture_waits_for_show_time(tmp_path):
    daemon = _daemon(tmp_path, render_at=clock(-30), deadline=clock(120), show_at=clock(60))
    try:
        daemon.start()
        _wait(lambda: daemon.store.renders(1) and daemon.store.renders(1)[0].status == "done")
        time.sleep(0.2)
        assert daemon.store.last_shown() is None
        daemon.show_time()
        _wait(lambda: daemon.store.last_shown() is not None)
        assert daemon.store.last_shown().reason == "tonight's picture"
    finally:
        daemon.stop()


def test_phone_page_says_nothing_is_shown_until_show_time(tmp_path):
    """The real daemon's page agrees with the panel (and 'frame status'): a finished picture waiting for
    its show time is not "now showing"."""
    import requests

    daemon = _daemon(tmp_path, render_at=clock(-30), deadline=clock(120), show_at=clock(60))
    try:
        daemon.start()
        _wait(lambda: daemon.store.renders(1) and daemon.store.renders(1)[0].status == "done")
        page = requests.get(f"http://127.0.0.1:{daemon.server.port}/", timeout=5, headers=OWNER).text
        assert daemon.status()["shown"] is None
        assert "Nothing on the frame yet" in page and "Now showing" not in page
        daemon.show_time()
        _wait(lambda: daemon.store.last_shown() is not None)
        page = requests.get(f"http://127.0.0.1:{daemon.server.port}/", timeout=5, headers=OWNER).text
        assert "Now showing" in page and "Nothing on the frame yet" not in page
    finally:
        daemon.stop()


def test_unfinished_render_of_a_past_night_is_marked_missed(tmp_path):
    daemon = _daemon(tmp_path, render_at=clock(180), deadline=clock(240), show_at=clock(240))
    stale = daemon.store.start_render("night", "2020-01-01")
    night.job_dir(daemon.state_dir, stale).mkdir(parents=True)
    try:
        daemon.start()
        assert daemon.store.render(stale).status == "missed"
        assert not night.job_dir(daemon.state_dir, stale).exists()
        assert FakeSupervisor.runs == []
    finally:
        daemon.stop()


def test_deadline_without_any_render_falls_back(tmp_path):
    daemon = _daemon(tmp_path, render_at=clock(180), deadline=clock(240), show_at=clock(240))
    favourite = add_picture(daemon.store)
    daemon.store.rate(favourite, "thumb", 1)
    try:
        daemon.start()
        daemon.deadline_passed()
        _wait(lambda: daemon.store.last_shown() is not None)
        assert daemon.store.last_shown().reason == "fallback"
        assert "no render ran" in daemon.status()["notice"]
    finally:
        daemon.stop()
