"""``frame run``: the long-running daemon. Ties the store, the scheduler, the HTTP API and supervised
render/show workers together and is the API's ``Controller``.

Threads: the main thread runs ``run_forever`` (systemd watchdog pings, deferred shows after quiet
hours, status); APScheduler's pool runs the jobs; one render thread and one show thread at most; the
waitress server; the button dispatcher of ``frame.buttons.dispatch`` when ``buttons.enabled``; the MQTT bridge's
command and state threads and paho's network thread when ``mqtt.host`` is set (``frame.daemon.mqtt``). SIGTERM sets
``stop_event``, which also stops a running worker (its last per-step checkpoint is on disk) — the next
start resumes that render.

Showing: every request (a new picture, rotation, fallback, the API, a button, the info screen) goes
through ``frame.daemon.showing`` (tickets, quiet hours, the panel's rest).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frame.atomicfile import make_dirs
from frame.buttons.dispatch import Buttons
from frame.config import state_dir
from frame.config.schema import Config
from frame.daemon import allocator, buttons_bridge, notices, panel_options, schedule
from frame.daemon.feeds.fetch import FeedFetcher, refresh_feeds
from frame.daemon.http.app import create_app
from frame.daemon.http.contract import MODEL_IMPORTS, Busy, PageFactory
from frame.daemon.http.token import ensure_token
from frame.daemon.jobs import at_start
from frame.daemon.jobs import night as nights
from frame.daemon.jobs.supervisor import Supervisor
from frame.daemon.live_settings import LiveSettings, feed_fetcher
from frame.daemon.lock import StateDirLock
from frame.daemon.sdnotify import Notifier, watchdog_interval
from frame.daemon.showing import PanelShows
from frame.daemon.status import LiveStatus
from frame.daemon.store.database import Store
from frame.daemon.wishes import Wishes
from frame.net.addresses import page_urls
from frame.net.server import HttpServer

if TYPE_CHECKING:  # apscheduler is imported when the scheduler is built (schedule.build_scheduler)
    from apscheduler.schedulers.background import BackgroundScheduler
    from flask import Flask

    from frame.daemon.mqtt.bridge import MqttBridge

log = logging.getLogger(__name__)

STOP_TIMEOUT_SECONDS = 9.0


def next_in_rotation(ids: list[int], current: int | None) -> int | None:
    """The rotation's next picture after ``current``: the next larger id, wrapping to the first."""
    later = [i for i in ids if current is None or i > current]
    return (later or ids or [None])[0]


class Daemon:
    """The running frame; ``start()``, then ``run_forever()`` until ``stop_event`` is set, then ``stop()``."""

    def __init__(self, config: Config, *, notifier: Notifier | None = None,
                 supervisor_factory: Callable[..., Supervisor] = Supervisor,
                 config_path: str | Path | None = None, pin_factory: Any = None,
                 pages: PageFactory | None = None, settings_problem: str | None = None) -> None:
        """``config_path``: the file ``config`` came from (the web page's settings check re-reads it);
        ``pin_factory``: a gpiozero pin factory for the buttons (tests use ``MockFactory``); ``pages``:
        builds the phone pages served next to the API (``frame run`` passes
        ``frame.web.create_blueprint``; without it the daemon serves the JSON API only);
        ``settings_problem``: why the owner's ``settings.yaml`` was set aside at start."""

        self.config = config
        self.config_path = config_path
        self.pages = pages
        self._pin_factory = pin_factory
        self.state_dir = state_dir(config)
        make_dirs(self.state_dir)
        # first, before the store is opened (and maybe recovered): one daemon per state directory
        self.lock = StateDirLock.acquire(self.state_dir)
        try:
            self.store = Store.open(self.state_dir)
            self.token = ensure_token(config.web.token, self.state_dir)
        except BaseException:
            self.lock.release()
            raise
        self.tz = schedule.resolve_timezone(config.schedule.timezone)
        self.live = LiveStatus()
        self.stop_event = threading.Event()
        self.wishes = Wishes(self.state_dir)
        self.ctx = nights.RenderContext(config, self.store, self.state_dir, self.live, self.stop_event,
                                        supervisor_factory, panel_since=panel_options.note(self.state_dir,
                                                                                           config.display),
                                        wishes=self.wishes)
        self.notifier = notifier or Notifier()
        self.live.add_listener(self.notifier.status)
        self.fetcher: FeedFetcher = feed_fetcher(config.feeds, self.state_dir)
        self._render_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.scheduler: BackgroundScheduler | None = None
        self.app: Flask | None = None
        self.server: HttpServer | None = None
        self.buttons: Buttons | None = None
        self.mqtt: MqttBridge | None = None
        self.settings = LiveSettings(self, settings_problem)
        self.shows = PanelShows(self, lambda name, target: self._spawn(name, target))

    # lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        last = self.store.last_shown()
        if last:
            self.live.update(shown={"picture_id": last.picture_id, "reason": last.reason,
                                      "since": last.shown_at, "output": None})
        self.scheduler = schedule.build_scheduler(self.config, self.tz, self.jobs())
        self.scheduler.start()
        self.app = create_app(self.config, self.store, token=self.token, controller=self, state_dir=self.state_dir,
                              pages=self.pages, config_path=self.config_path)
        self.server = HttpServer(self.app, self.config.web.listen)
        self.server.start()
        log.info("phone page: %s", ", ".join(page_urls(self.config.web.listen, self.server.port)))
        self.buttons = buttons_bridge.start(self, self.config.buttons, self._pin_factory)
        if self.config.mqtt.host:  # paho-mqtt (+0.7 MiB) is imported only when MQTT is on
            from frame.daemon.mqtt import bridge as mqtt_bridge
            self.mqtt = mqtt_bridge.start(self, self.config.mqtt)
        if self.settings.problem:
            self.live.update(notice=self.settings.problem, notice_details=None)
        # resume a render cut short by a stop, crash or power cut, or start tonight's if it was missed
        begin = at_start.render_to_start(self.store, self.state_dir, self.config.schedule, self.tz)
        if begin is not None:
            self.start_render(begin.kind, begin.night, begin.render_id)
        # an import from the phone cut by a stop or power cut goes on (after that render, if one started)
        self.app.extensions["frame"][MODEL_IMPORTS].resume(self.config.worker.memory_limit_mb)
        self.refresh_status()
        self.notifier.ready(self.live.snapshot().get("state", ""))
        log.info("frame daemon started (state in %s)", self.state_dir)

    def run_forever(self) -> None:
        """Main loop: the watchdog is pinged only from here, so a hung daemon gets restarted."""
        interval = min(watchdog_interval() or 5.0, 5.0)
        self.notifier.watchdog()
        next_upkeep = time.monotonic() + allocator.UPKEEP_SECONDS
        while not self.stop_event.wait(interval):
            self.notifier.watchdog()
            self._flush_pending_show()
            self.refresh_status()
            if time.monotonic() >= next_upkeep:
                next_upkeep = time.monotonic() + allocator.UPKEEP_SECONDS
                allocator.upkeep()  # the garbage of five minutes of page loads, not of hours

    def stop(self) -> None:
        """Stop everything within ~10 s: workers get SIGTERM (their checkpoint is on disk)."""
        started = time.monotonic()
        self.stop_event.set()
        self.notifier.stopping()
        if self.buttons is not None:  # first: no press may start anything while the rest stops
            self.buttons.close()
            self.buttons = None
        if self.mqtt is not None:  # says offline (retained); commands sent meanwhile wait in its session
            self.mqtt.stop()
            self.mqtt = None
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        if self.app is not None:  # its child is stopped; the record says running, so the next start resumes it
            self.app.extensions["frame"][MODEL_IMPORTS].stop()
        for thread in list(self._threads):
            thread.join(timeout=max(0.1, STOP_TIMEOUT_SECONDS - (time.monotonic() - started)))
        if self.server is not None:
            self.server.close()
        try:
            self.store.close()
        finally:
            self.lock.release()
        log.info("frame daemon stopped in %.1f s", time.monotonic() - started)

    def jobs(self) -> dict[str, Callable[[], None]]:
        job = schedule.logged_job
        return {"night": job("night", self.nightly), "deadline": job("deadline", self.deadline_passed),
                "show": job("show", self.show_time), "feeds": job("feeds", self.refresh_feeds),
                "rotate": job("rotate", self.rotate)}

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    def refresh_status(self) -> None:
        now = datetime.now(self.tz)
        runs = schedule.next_runs(self.scheduler) if self.scheduler else {}
        self.live.update(quiet=self.wishes.quiet_hold() or schedule.in_quiet_hours(
            now, self.config.schedule.quiet_hours, self.tz), next_runs=runs)

    # Controller (the API) -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        data = self.live.snapshot()
        data["pending_show"] = self.shows.pending[0] if self.shows.pending else None
        return data

    def render_now(self) -> dict[str, Any]:
        render_id = self.start_render("now", None, None)
        return {"render_id": render_id, "state": "rendering"}

    def show(self, picture_id: int) -> dict[str, Any]:
        return self.request_show(picture_id, "owner")

    # settings from the phone (frame.daemon.settings checks and saves them, live_settings takes them over)

    @property
    def exit_code(self) -> int:
        """What ``frame run`` exits with: 0, or ``RESTART_EXIT_CODE`` after the owner asked for a restart."""
        return self.settings.exit_code

    def apply_settings(self, config: Config) -> dict[str, Any]:
        return self.settings.apply(config)

    def settings_state(self) -> dict[str, Any]:
        return self.settings.state()

    def request_restart(self, delay: float = 0.5) -> None:
        self.settings.request_restart(delay)

    # renders --------------------------------------------------------------------------------------

    def start_render(self, kind: str, night: schedule.Night | None, render_id: int | None,
                     note: str | None = None) -> int:
        """Start (or resume ``render_id``) in the render thread; Busy if one is running. ``note``: the
        notice to keep once it paints (a queued prompt set aside before this render)."""
        if not self._render_lock.acquire(blocking=False):
            raise Busy("a render is already running; only one at a time")
        resume = render_id is not None
        try:
            if render_id is None:
                render_id = self.store.start_render(kind, night.key if night else None)
        except BaseException:
            self._render_lock.release()
            raise
        # "rendering" from this moment: the status page the owner's button leads to must not say idle
        # while the render thread is still writing the job folder
        self.live.render_started(render_id, kind)
        self._spawn("render", lambda: self._render_thread(render_id, kind, night, resume, note))
        return render_id

    def _render_thread(self, render_id: int, kind: str, night: schedule.Night | None, resume: bool = False,
                       note: str | None = None) -> None:
        try:
            deadline = night.deadline.timestamp() if night else None
            outcome, picture_id = nights.render(self.ctx, render_id, kind, deadline, resume=resume)
        except Exception:
            log.exception("render %d crashed in the daemon", render_id)
            self.store.finish_render(render_id, "failed", error="internal error (see the log)")
            self.live.render_finished()  # it may have crashed before nights.render took the status over
            outcome, picture_id = None, None
        finally:
            self._render_lock.release()
        if self.stop_event.is_set():
            return
        if picture_id is not None:
            self.live.update(notice=note, notice_details=None)
            if night is None or datetime.now(self.tz) >= night.show_at:
                self.request_show(picture_id, "new picture")
        elif outcome is not None and outcome.status == "deadline":
            self.fallback(notices.render_advice("missed", None), "the render missed its deadline")
        else:
            step = f" at step {outcome.step!r}" if outcome is not None and outcome.step else ""
            error = f"the render failed{step}: {outcome.error if outcome else 'internal error (see the log)'}"
            if not self._paint_the_next(kind, night, note, outcome, error):
                self.fallback(notices.render_advice("failed", error), error)

    def _paint_the_next(self, kind: str, night: schedule.Night | None, note: str | None, outcome: Any,
                        error: str) -> bool:
        """After a night's render set its queued prompt aside (``night._count_prompt_failure``): start
        the night again on the next candidate, once, while its deadline is ahead; the notice that names
        the prompt stays once it paints. False when there is nothing to start (then the fallback)."""
        if (kind != "night" or night is None or note is not None or outcome is None
                or " was set aside: " not in (outcome.error or "") or datetime.now(self.tz) >= night.deadline):
            return False
        notice = notices.sentence(notices.render_advice("failed", error))
        self.live.update(notice=notice, notice_details=error)
        log.warning("%s; painting the night's next candidate", error)
        try:
            self.start_render("night", night, None, note=notice)
        except Busy:
            return False
        return True

    # jobs -----------------------------------------------------------------------------------------

    def nightly(self) -> None:
        night = schedule.night_at(datetime.now(self.tz), self.config.schedule, self.tz)
        if self.store.night_done(night.key):
            log.info("night %s already has its picture", night.key)
            return
        try:
            self.start_render("night", night, None)
        except Busy:
            log.warning("night %s: another render is still running; not starting a second one", night.key)

    def deadline_passed(self) -> None:
        night = schedule.night_at(datetime.now(self.tz), self.config.schedule, self.tz)
        if not self.store.night_render_started(night.key) and not self._render_lock.locked():
            self.fallback(notices.NO_RENDER, f"no render ran for night {night.key}")

    def show_time(self) -> None:
        night = schedule.night_at(datetime.now(self.tz), self.config.schedule, self.tz)
        picture_id = self.store.night_picture(night.key)
        shown = self.store.last_shown()
        if picture_id is not None and (shown is None or shown.picture_id != picture_id):
            self.request_show(picture_id, "tonight's picture")

    def refresh_feeds(self) -> None:
        refresh_feeds(self.store, self.config, self.fetcher)

    def rotate(self) -> None:
        """Every ``schedule.rotate_favourites_minutes``: the next favourite or uploaded photo
        (``Store.rotation_ids``), so family photos come round between generated nights."""
        if self.shows.quiet() or self._render_lock.locked():
            return
        shown = self.store.last_shown()
        picture_id = next_in_rotation(self.store.rotation_ids(), shown.picture_id if shown else None)
        if picture_id is not None:
            self.request_show(picture_id, "rotation")

    # showing (frame.daemon.showing: tickets, quiet hours, the panel's rest) ----------------------------

    def on_panel(self) -> int | None:
        return self.shows.on_panel()

    def refreshing(self) -> bool:
        return self.shows.refreshing()

    def browse_base(self) -> int | None:
        return self.shows.browse_base()

    def info_on_panel(self) -> bool:
        return self.shows.info_on_panel()

    def request_show(self, picture_id: int, reason: str) -> dict[str, Any]:
        return self.shows.request(picture_id, reason)

    def show_info(self) -> dict[str, Any]:
        return self.shows.show_info()

    def show_pairing_code(self, code: str, minutes: int) -> dict[str, Any]:
        return self.shows.show_pairing(code, minutes)

    def after_pairing(self) -> None:
        self.shows.after_pairing()

    def _flush_pending_show(self) -> None:
        self.shows.flush_pending()

    def fallback(self, reason: str, details: str | None = None) -> None:
        """Show the least recently shown favourite instead of tonight's picture, and say why: ``reason``
        is the owner's clause (``notices.render_advice``), ``details`` the raw error for the log and
        the page's "details"."""
        favourite = self.store.least_recently_shown(self.store.favourite_ids())
        if favourite is None:
            self.live.update(notice=notices.fallback_notice(reason, None), notice_details=details)
            log.warning("%s; no favourite to fall back on", details or reason)
            return
        self.live.update(notice=notices.fallback_notice(reason, favourite), notice_details=details)
        log.warning("%s; showing favourite %d instead", details or reason, favourite)
        self.request_show(favourite, "fallback")

