from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from frame.config import ScheduleConfig
from frame.daemon import schedule
from tests.daemon.conftest import make_config

BERLIN = ZoneInfo("Europe/Berlin")


def _at(text):
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN)


def test_night_across_midnight_keeps_one_name():
    cfg = ScheduleConfig(render_at="23:00", deadline="07:00", show_at="07:30")
    late, early = schedule.night_at(_at("2026-11-29T23:30"), cfg, BERLIN), schedule.night_at(
        _at("2026-11-30T03:00"), cfg, BERLIN)
    assert late.key == early.key == "2026-11-29"
    assert early.deadline == _at("2026-11-30T07:00") and early.show_at == _at("2026-11-30T07:30")
    assert early.contains(_at("2026-11-30T06:59")) and not early.contains(_at("2026-11-30T07:00"))


def test_night_before_render_time_belongs_to_yesterday():
    cfg = ScheduleConfig(render_at="01:00", deadline="07:00")
    assert schedule.night_at(_at("2026-11-30T00:30"), cfg, BERLIN).key == "2026-11-29"
    assert schedule.night_at(_at("2026-11-30T01:00"), cfg, BERLIN).key == "2026-11-30"


@pytest.mark.parametrize(("now", "done", "grace", "expected"), [
    ("2026-11-30T03:00", False, 360, "2026-11-30"),   # frame was off at 01:00: render tonight
    ("2026-11-30T03:00", True, 360, None),            # already rendered
    ("2026-11-30T08:00", False, 360, None),           # past the deadline
    ("2026-11-30T03:00", False, 60, None),            # beyond the misfire grace
    ("2026-11-30T00:30", False, 360, None),           # yesterday's window is over
])
def test_catch_up(now, done, grace, expected):
    cfg = ScheduleConfig(render_at="01:00", deadline="07:00", misfire_grace_minutes=grace)
    night = schedule.catch_up_night(_at(now), cfg, BERLIN, done)
    assert (night.key if night else None) == expected


@pytest.mark.parametrize(("quiet", "clock", "expected"), [
    ("22:00-07:00", "23:30", True), ("22:00-07:00", "06:59", True), ("22:00-07:00", "07:00", False),
    ("22:00-07:00", "12:00", False), ("12:00-13:00", "12:30", True), ("", "12:30", False)])
def test_quiet_hours(quiet, clock, expected):
    assert schedule.in_quiet_hours(_at(f"2026-11-30T{clock}"), quiet, BERLIN) is expected


def test_local_timezone_resolves():
    tz = schedule.resolve_timezone("local")
    assert datetime.now(tz).utcoffset() is not None
    assert schedule.resolve_timezone("Asia/Tokyo") == ZoneInfo("Asia/Tokyo")


def test_scheduler_jobs_follow_config(tmp_path):
    from frame.config import FeedSource

    config = make_config(tmp_path, schedule={"render_at": "02:15", "rotate_favourites_minutes": 30,
                                             "misfire_grace_minutes": 90},
                         feeds={"sources": (FeedSource(url="http://127.0.0.1:1/f"),), "refresh_minutes": 45})
    calls = {name: (lambda: None) for name in ("night", "deadline", "show", "feeds", "rotate")}
    scheduler = schedule.build_scheduler(config, BERLIN, calls)
    scheduler.start(paused=True)
    try:
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {"night", "deadline", "show", "feeds", "rotate"}
        night = jobs["night"]
        assert night.coalesce and night.misfire_grace_time == 90 * 60
        nxt = night.trigger.get_next_fire_time(None, _at("2026-11-30T03:00"))
        assert nxt == _at("2026-12-01T02:15")
        assert jobs["feeds"].trigger.interval == timedelta(minutes=45)
        assert set(schedule.next_runs(scheduler)) == set(jobs)
    finally:
        scheduler.shutdown(wait=False)
