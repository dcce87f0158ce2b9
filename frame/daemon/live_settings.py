"""Settings from the phone in the running daemon: taking a saved configuration over without a restart,
telling the page which saved settings still wait for one, and the clean restart the page can ask for.

``frame.daemon.settings`` checks and saves a change; the page then hands the new ``Config`` to the
daemon (``Controller.apply_settings``), which passes it here. What follows the settings at once is
rebuilt from it: the scheduler's jobs (times, zone, feeds, rotation of favourites), the feed fetcher,
quiet hours, the panel options (the picture on the panel is shown again with them) and the pages' and
API's copy. A render already running keeps the settings it started with. Buttons and the log level
are read only at start: they are listed as waiting for a restart, which ends ``frame run`` with
``RESTART_EXIT_CODE`` so that systemd starts it again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from frame.config.schema import Config, FeedsConfig
from frame.daemon import panel_options, schedule
from frame.daemon.feeds.fetch import FeedFetcher
from frame.daemon.http.app import update_config
from frame.daemon.jobs.night import RenderContext
from frame.daemon.settings import changed_fields

if TYPE_CHECKING:  # apscheduler and flask are imported by whoever builds them
    from apscheduler.schedulers.background import BackgroundScheduler
    from flask import Flask

log = logging.getLogger(__name__)

# ``frame run`` exits with this when the owner asks for a restart; the unit restarts on it
# (RestartForceExitStatus=) without counting it as a failure (SuccessExitStatus=). EX_TEMPFAIL.
RESTART_EXIT_CODE = 75


def feed_fetcher(feeds: FeedsConfig, state_dir: Path) -> FeedFetcher:
    """The fetcher for ``feeds``. Retry pauses scale with the timeout: a feed with a short timeout is
    a local, fast one."""
    return FeedFetcher(feeds, Path(state_dir) / "feeds", backoff=min(2.0, feeds.timeout_seconds / 5))


class Host(Protocol):
    """The parts of the running daemon (``service.Daemon``) that follow the settings."""

    config: Config
    ctx: RenderContext
    tz: tzinfo
    fetcher: FeedFetcher
    scheduler: BackgroundScheduler | None
    app: Flask | None
    state_dir: Path
    stop_event: threading.Event

    def jobs(self) -> dict[str, Callable[[], None]]: ...

    def refresh_status(self) -> None: ...

    def on_panel(self) -> int | None: ...

    def request_show(self, picture_id: int, reason: str) -> dict[str, Any]: ...


class LiveSettings:
    """The settings half of one running daemon. ``started`` is the configuration the daemon started
    with (what the settings read only at start still are); ``problem`` says why the owner's
    ``settings.yaml`` was set aside at start (None when it was not)."""

    def __init__(self, host: Host, problem: str | None = None) -> None:
        self._host = host
        self.started = host.config
        self.problem = problem
        self.exit_code = 0
        self._lock = threading.Lock()

    def apply(self, config: Config) -> dict[str, Any]:
        """Take ``config`` over; returns what changed (field key → when it applies) and ``state()``."""
        host = self._host
        with self._lock:
            old, host.config = host.config, config
            changed = changed_fields(old, config)
            host.ctx.config = config
            host.tz = schedule.resolve_timezone(config.schedule.timezone)
            if config.feeds != old.feeds:
                host.fetcher = feed_fetcher(config.feeds, host.state_dir)
            if host.scheduler is not None:
                schedule.reschedule(host.scheduler, config, host.tz, host.jobs(),
                                    feeds_now=config.feeds.sources != old.feeds.sources)
            panel_changed = config.display != old.display
            if panel_changed:
                host.ctx.panel_since = panel_options.note(host.state_dir, config.display)
            if host.app is not None:
                update_config(host.app, config)
        if changed:
            log.info("settings changed from the phone: %s", ", ".join(sorted(changed)))
        host.refresh_status()
        shown = host.on_panel()
        if panel_changed and shown is not None:
            host.request_show(shown, "panel settings changed")
        return {"changed": changed, **self.state()}

    def state(self) -> dict[str, Any]:
        """For the settings page: the settings waiting for a restart, whether this daemon can be
        restarted from the page (it runs under systemd), and why settings.yaml was set aside."""
        waiting = [key for key, applies in changed_fields(self.started, self._host.config).items()
                   if applies == "restart"]
        return {"restart_needed": sorted(waiting), "can_restart": bool(os.environ.get("INVOCATION_ID")),
                "settings_problem": self.problem}

    def request_restart(self, delay: float = 0.5) -> None:
        """Stop, and exit with RESTART_EXIT_CODE so systemd starts the daemon again (after ``delay``,
        so the page that asked gets its answer first)."""
        log.info("restart requested from the phone")
        self.exit_code = RESTART_EXIT_CODE
        timer = threading.Timer(delay, self._host.stop_event.set)
        timer.daemon = True
        timer.start()
