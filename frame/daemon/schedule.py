"""When things happen: the night window (render start, deadline, show time), quiet hours, and the
APScheduler jobs derived from ``config.schedule`` and ``config.feeds``.

A *night* is named after the local date of the ``render_at`` occurrence that opened it, so a night that
starts at 23:00 and ends at 07:00 keeps one name across midnight. APScheduler's misfire handling only
helps while the process runs (its in-memory job store forgets missed runs across a power cut), so the
daemon also calls ``catch_up_night`` at start: a frame switched on at 03:00 still renders tonight.
"""

from __future__ import annotations

import logging
import time as clock
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from tzlocal import get_localzone

from frame.config.schema import Config, ScheduleConfig

if TYPE_CHECKING:  # imported when the scheduler is built (build_scheduler)
    from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger(__name__)

DAY = timedelta(days=1)


def resolve_timezone(name: str) -> tzinfo:
    """``"local"`` → the system zone (via tzlocal, which APScheduler 3 already depends on)."""
    if name == "local":
        try:
            return get_localzone()
        except Exception:  # no zone configured on the system: fixed current offset
            return datetime.now().astimezone().tzinfo

    return ZoneInfo(name)


def parse_clock(text: str) -> time:
    hour, minute = text.split(":")
    return time(int(hour), int(minute))


def _offset(start: time, end: time) -> timedelta:
    """Time from ``start`` to the next ``end`` on the clock (a full day when equal)."""
    delta = (end.hour * 60 + end.minute) - (start.hour * 60 + start.minute)
    return timedelta(minutes=delta % (24 * 60) or 24 * 60)


@dataclass(frozen=True)
class Night:
    """One night's window, all times aware in the configured zone."""

    key: str
    start: datetime
    deadline: datetime
    show_at: datetime

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.deadline


def night_at(moment: datetime, schedule: ScheduleConfig, tz: tzinfo) -> Night:
    """The night whose ``render_at`` most recently passed at ``moment`` (aware or naive-local)."""
    local = moment.astimezone(tz) if moment.tzinfo else moment.replace(tzinfo=tz)
    render_at = parse_clock(schedule.render_at)
    start = datetime.combine(local.date(), render_at, tzinfo=tz)
    if start > local:
        start -= DAY
    return Night(key=start.date().isoformat(), start=start,
                 deadline=start + _offset(render_at, parse_clock(schedule.deadline)),
                 show_at=start + _offset(render_at, parse_clock(schedule.show_at)) % DAY)


def catch_up_night(moment: datetime, schedule: ScheduleConfig, tz: tzinfo, done: bool) -> Night | None:
    """The night to render now because its start was missed (frame off, daemon restarted), or None.

    Only while the night's deadline has not passed and within ``misfire_grace_minutes`` of its start.
    """
    night = night_at(moment, schedule, tz)
    grace = timedelta(minutes=schedule.misfire_grace_minutes)
    if done or not night.contains(moment) or moment - night.start > grace:
        return None
    return night


def in_quiet_hours(moment: datetime, quiet: str, tz: tzinfo) -> bool:
    """Whether ``moment`` is inside ``quiet`` (``"HH:MM-HH:MM"``, may wrap midnight; "" = never)."""
    if not quiet:
        return False
    first, last = (parse_clock(part.strip()) for part in quiet.split("-"))
    local = moment.astimezone(tz).time().replace(second=0, microsecond=0)
    if first <= last:
        return first <= local < last
    return local >= first or local < last


def logged_job(name: str, func: Callable[[], Any]) -> Callable[[], None]:
    """A scheduler job: one log line at start and one at the end with the duration; it never raises
    (a failure is logged with its traceback, and the job runs again at its next time)."""
    def run() -> None:
        started = clock.monotonic()
        log.info("job %s started", name)
        try:
            func()
        except Exception:
            log.exception("job %s failed after %.1f s", name, clock.monotonic() - started)
            return
        log.info("job %s finished in %.1f s", name, clock.monotonic() - started)
    return run


def build_scheduler(config: Config, tz: tzinfo, jobs: dict[str, Callable[[], None]]) -> BackgroundScheduler:
    """A BackgroundScheduler with the daemon's jobs; ``jobs`` maps names to callables:
    ``night``, ``deadline``, ``show``, ``feeds`` and (when enabled) ``rotate``."""

    grace = max(1, config.schedule.misfire_grace_minutes * 60)
    scheduler = BackgroundScheduler(timezone=tz, job_defaults={
        "coalesce": True, "max_instances": 1, "misfire_grace_time": grace})
    add_jobs(scheduler, config, tz, jobs)
    return scheduler


def add_jobs(scheduler: BackgroundScheduler, config: Config, tz: tzinfo, jobs: dict[str, Callable[[], None]], *,
             feeds_now: bool = True) -> None:
    """Add the daemon's jobs for ``config``; also how a running daemon takes over new settings
    (``reschedule``). ``feeds_now``: fetch the feeds at once (at start, or when they changed)."""

    schedule = config.schedule
    grace = max(1, schedule.misfire_grace_minutes * 60)

    def cron(clock: str) -> CronTrigger:
        at = parse_clock(clock)
        return CronTrigger(hour=at.hour, minute=at.minute, timezone=tz)

    scheduler.add_job(jobs["night"], cron(schedule.render_at), id="night", name="nightly render",
                      misfire_grace_time=grace)
    scheduler.add_job(jobs["deadline"], cron(schedule.deadline), id="deadline", name="render deadline",
                      misfire_grace_time=None)
    scheduler.add_job(jobs["show"], cron(schedule.show_at), id="show", name="show tonight's picture",
                      misfire_grace_time=None)
    if config.feeds.sources:
        first = {"next_run_time": datetime.now(tz)} if feeds_now else {}
        scheduler.add_job(jobs["feeds"], IntervalTrigger(minutes=config.feeds.refresh_minutes, timezone=tz),
                          id="feeds", name="refresh feeds", **first)
    if schedule.rotate_favourites_minutes and "rotate" in jobs:
        scheduler.add_job(jobs["rotate"], IntervalTrigger(minutes=schedule.rotate_favourites_minutes,
                                                          timezone=tz), id="rotate", name="rotate favourites")


def reschedule(scheduler: BackgroundScheduler, config: Config, tz: tzinfo, jobs: dict[str, Callable[[], None]], *,
               feeds_now: bool) -> None:
    """Replace every job with those of ``config`` in the running scheduler (new times, zone, feeds,
    rotation): no restart, and a job running now finishes undisturbed."""
    scheduler.remove_all_jobs()
    add_jobs(scheduler, config, tz, jobs, feeds_now=feeds_now)


def next_runs(scheduler: BackgroundScheduler) -> dict[str, str | None]:
    """ISO times of every job's next run, for the status."""
    return {job.id: job.next_run_time.isoformat() if job.next_run_time else None for job in scheduler.get_jobs()}
