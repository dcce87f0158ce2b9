"""Which render the daemon starts when it starts: the one a stop, crash or power cut left unfinished
(resumed from its checkpoint, or begun again when its job file never reached the card), or tonight's
when its start was missed while the frame was off. APScheduler forgets missed runs across a power
cut, so this is how a frame switched on at 03:00 still renders tonight.

Renders that can no longer run are closed in the store here (superseded, missed, job file lost) and
their job folders removed; what is left to start is returned, and the daemon starts it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path

from frame.config.schema import ScheduleConfig
from frame.daemon import schedule
from frame.daemon.jobs import night as nights
from frame.daemon.store.database import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartRender:
    """A render to start: ``render_id`` set = resume that render from its checkpoint."""

    kind: str
    night: schedule.Night | None
    render_id: int | None


def render_to_start(store: Store, state_dir: Path, sched: ScheduleConfig, tz: tzinfo,
                    now: datetime | None = None) -> StartRender | None:
    """Close what cannot run any more and return the render to start ``now`` (default: this moment), or None."""
    now = now or datetime.now(tz)
    unfinished = store.unfinished_renders()
    for stale in unfinished[:-1]:
        store.finish_render(stale.id, "failed", error="superseded by a newer render")
        nights.discard_job(state_dir, stale.id)
    nights.sweep_jobs(state_dir, {r.id for r in unfinished[-1:]})
    if unfinished:
        last = unfinished[-1]
        night = schedule.night_at(now, sched, tz) if last.kind == "night" else None
        if night is not None and (night.key != last.night or not night.contains(now)):
            store.finish_render(last.id, "missed", error="the daemon was down until after the deadline")
            nights.discard_job(state_dir, last.id)
        elif not nights.job_resumable(state_dir, last.id):
            log.warning("render %d cannot be resumed: its job file never reached the card (power cut?); "
                        "starting it again as a new render", last.id)
            store.finish_render(last.id, "failed", error="its job file was lost (power cut); restarted")
            nights.discard_job(state_dir, last.id)
            return StartRender(last.kind, night, None)
        else:
            log.info("resuming render %d from its checkpoint", last.id)
            return StartRender(last.kind, night, last.id)
    tonight = schedule.night_at(now, sched, tz)
    night = schedule.catch_up_night(now, sched, tz, store.night_done(tonight.key))
    if night is not None:
        log.info("the render for night %s was missed; starting it now", night.key)
        return StartRender("night", night, None)
    return None
