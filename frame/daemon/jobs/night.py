"""One night's render from the daemon's side: write the job (what it paints: ``render_job``), run it
in a supervised worker, publish the picture, show it; and ``run_night`` — the same thing synchronously
for ``frame demo``.

The job description (seed, chosen prompt or candidates, rating history) is written once into
``<state_dir>/checkpoints/render-<id>/`` before the first worker starts, so every restart — after a
crash, an OOM kill or a daemon restart — renders exactly the same picture from its checkpoint.

The folder is created and removed durably (its parent fsynced), and only after the render's record is
committed (created) or finished (removed). A render whose job file never reached the card is not
resumed under its id with a new seed: the daemon closes it and starts a new render
(``job_resumable``); folders of renders that are not running are removed at start (``sweep_jobs``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml

from frame.atomicfile import make_dirs, remove_tree, write_bytes_atomic
from frame.config import state_dir as config_state_dir
from frame.config import to_plain
from frame.config.schema import Config
from frame.daemon.jobs.render_job import build_job
from frame.daemon.jobs.supervisor import Outcome, StatusEvent, Supervisor, worker_command
from frame.daemon.status import LiveStatus
from frame.daemon.store import gallery
from frame.daemon.store.database import Store, now_iso
from frame.daemon.store.recovery import backup_path
from frame.daemon.wishes import Wishes
from frame.errors import FrameError
from frame.statefile import read_json
from frame.worker.events import RenderOutput, ShowOutput
from frame.worker.records import (
    Job,
    RenderKind,
    ShowJob,
    read_job,
    write_job,
)

log = logging.getLogger(__name__)
OutputT = TypeVar("OutputT")


@dataclass
class RenderContext:
    """What a render needs from the daemon (or from ``run_night``)."""

    config: Config
    store: Store
    state_dir: Path
    status: LiveStatus = field(default_factory=LiveStatus)
    stop: threading.Event = field(default_factory=threading.Event)
    supervisor_factory: Callable[..., Supervisor] = Supervisor
    supervisor: Supervisor | None = None
    panel_since: str = ""  # pictures made at or before this (UTC ISO) are prepared again (panel_options)
    wishes: Wishes | None = None  # tonight's theme, chosen by the owner (frame.daemon.wishes)


@dataclass(frozen=True)
class NightResult:
    """A finished night: the stored picture and its files (``shown`` is what the panel got)."""

    picture_id: int
    render_id: int
    image: Path
    panel: Path | None
    shown: Path | None
    prompt: str
    theme: str
    style: str
    restarts: int
    seconds: float
    peak_rss_mb: float


def job_dir(state_dir: Path, render_id: int) -> Path:
    return Path(state_dir) / "checkpoints" / f"render-{render_id}"


def discard_job(state_dir: Path, render_id: int) -> None:
    """Remove a render's checkpoint folder once it can no longer be resumed (durably)."""
    folder = job_dir(state_dir, render_id)
    if folder.exists():
        remove_tree(folder)


def job_resumable(state_dir: Path, render_id: int) -> bool:
    """Whether the render's job file is on disk and intact (else resuming would need a new seed)."""
    return isinstance(read_json(job_dir(state_dir, render_id) / "job.json"), dict)


def sweep_jobs(state_dir: Path, running: set[int]) -> None:
    """At start: remove job folders of renders that are not running (their removal was cut short, or
    the store was restored from an older backup and the ids will be used again) and leftover
    show, preview, info-screen and short-child folders (none runs yet)."""
    folder = Path(state_dir) / "checkpoints"
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        match = re.fullmatch(r"render-(\d+)", entry.name)
        transient = entry.name.startswith(("show-", "info-", "preview-", "child-"))
        if (match and int(match.group(1)) not in running) or transient:
            log.info("removing the leftover job folder %s", entry)
            remove_tree(entry)


def write_job_files(folder: Path, config: Config, job: Job) -> None:
    """A worker's input: ``config.yaml`` (without the owner token, which the worker never needs) and
    then ``job.json``, whose presence marks the folder complete."""

    plain = to_plain(config, reveal_secrets=True)
    plain["web"]["token"] = ""
    write_bytes_atomic(folder / "config.yaml", yaml.safe_dump(plain, sort_keys=False, allow_unicode=True).encode())
    write_job(folder, job)


def ensure_job(ctx: RenderContext, render_id: int, kind: RenderKind, resume: bool = False,
               deadline: float | None = None) -> Path:
    """The job folder for ``render_id``: written on first use, reused (never rewritten) after.

    ``resume``: the render was started before (a restart); its job file must be there — a new one
    would render a different picture under the same id. A new render never reuses a folder it finds
    (left by a render of the same id in a store later restored from an older backup)."""
    folder = job_dir(ctx.state_dir, render_id)
    if resume:
        if not job_resumable(ctx.state_dir, render_id):
            raise FrameError(f"render {render_id} cannot be resumed: its job file {folder / 'job.json'} is gone")
        return folder
    if folder.exists():
        log.warning("removing the stale job folder %s before render %d starts", folder, render_id)
        remove_tree(folder)
    make_dirs(folder)
    write_job_files(folder, ctx.config, build_job(ctx, render_id, kind, deadline))
    return folder


def _supervise(ctx: RenderContext, folder: Path, deadline: float | None, max_restarts: int,
               render_id: int | None, entry: str = "render") -> Outcome:
    worker = ctx.config.worker

    def on_restart(count: int, reason: str) -> None:
        if render_id is not None:
            ctx.store.count_restart(render_id)
        ctx.status.render_progress(stage=f"restarting worker ({reason})", restarts=count)

    def on_event(event: StatusEvent) -> None:
        ctx.status.render_progress(**event.progress())

    supervisor = ctx.supervisor_factory(
        worker.memory_limit_mb, max_restarts, on_restart=on_restart, command=worker_command(entry),
        on_event=on_event)
    ctx.supervisor = supervisor
    try:
        return supervisor.run(folder, stop=ctx.stop, deadline=deadline)
    finally:
        ctx.supervisor = None


def render(ctx: RenderContext, render_id: int, kind: RenderKind, deadline: float | None = None,
           resume: bool = False) -> tuple[Outcome, int | None]:
    """Run (or with ``resume``, continue) render ``render_id`` to the end; publish on success. Returns
    the outcome and the new picture id. ``stopped`` leaves the render open so the next start resumes it."""
    started = time.monotonic()
    folder = ensure_job(ctx, render_id, kind, resume=resume, deadline=deadline)
    ctx.status.render_started(render_id, kind)
    log.info("render %d (%s) started in %s", render_id, kind, folder)
    try:
        outcome = _supervise(ctx, folder, deadline, ctx.config.worker.max_restarts, render_id)
        outcome, picture_id = _finish(ctx, render_id, outcome, time.monotonic() - started)
    finally:
        ctx.status.render_finished()
    log.info("render %d ended: %s after %.1f s (%d restarts, worker peak %.0f MiB)", render_id,
             outcome.status, time.monotonic() - started, outcome.restarts, outcome.peak_rss_mb)
    return outcome, picture_id


def _finish(ctx: RenderContext, render_id: int, outcome: Outcome, seconds: float) -> tuple[Outcome, int | None]:
    """Record how the render ended and publish its picture; the outcome (failed at step "store" when
    the picture could not be saved) and the new picture's id."""
    if outcome.status == "stopped":
        return outcome, None  # the checkpoint stays: the next start resumes this render
    if outcome.status == "deadline":
        ctx.store.finish_render(render_id, "missed", error="the render missed its deadline")
        discard_job(ctx.state_dir, render_id)
        return outcome, None
    result = outcome.result
    if outcome.status != "done" or not isinstance(result, RenderOutput):
        outcome = _count_prompt_failure(ctx, render_id, outcome)
        step = f" at step {outcome.step!r}" if outcome.step else ""
        ctx.store.finish_render(render_id, "failed", error=f"failed{step}: {outcome.error}")
        discard_job(ctx.state_dir, render_id)
        return outcome, None
    meta = dataclasses.replace(result.meta, timings={**result.meta.timings, "total": round(seconds, 2)})
    try:
        picture_id = gallery.publish(ctx.store, ctx.state_dir, render_id, result.image, result.panel, meta,
                                     why_plot=result.why_plot)
    except FrameError as exc:
        log.error("render %d: %s; the previous picture stays shown", render_id, exc)
        ctx.store.finish_render(render_id, "failed", error=str(exc))
        discard_job(ctx.state_dir, render_id)  # frees the space the failed save needed
        return dataclasses.replace(outcome, status="failed", error=str(exc), step="store"), None
    if result.prompt_id:
        ctx.store.mark_prompt_used(result.prompt_id, picture_id)
    if result.feed_item_id:
        ctx.store.mark_feed_item_used(result.feed_item_id)
    ctx.store.finish_render(render_id, "done", picture_id=picture_id, timings=dict(meta.timings))
    _housekeeping(ctx, render_id, picture_id)
    return outcome, picture_id


def _count_prompt_failure(ctx: RenderContext, render_id: int, outcome: Outcome) -> Outcome:
    """A failed render of a queued prompt: count it against the prompt (``Store.prompt_failed``, which
    sets it aside at ``SET_ASIDE_AFTER``, so one prompt that cannot be painted no longer fails every
    night and blocks the prompts behind it) and name the prompt in the error the notice is made of
    (``notices.render_advice``). Failures that are not the prompt's are not counted: running out of
    memory (the night's settings and the model's), a step other than generating."""
    try:
        job = read_job(job_dir(ctx.state_dir, render_id))
    except (OSError, ValueError, TypeError):
        return outcome
    choice = getattr(job, "choice", None)
    prompt_id = getattr(choice, "prompt_id", None)
    if prompt_id is None:
        return outcome
    error = outcome.error or "the worker failed"
    counted = outcome.step in (None, "generate") and "memory" not in error.lower()
    prompt = ctx.store.prompt_failed(prompt_id, error) if counted else ctx.store.queued_prompt(prompt_id)
    text = choice.prompt if len(choice.prompt) <= 40 else choice.prompt[:39] + "…"
    aside = " was set aside" if prompt is not None and prompt.set_aside else ""
    if aside:
        log.warning("queued prompt %d set aside after %d failed renders: %s", prompt_id, prompt.failures, error)
    return dataclasses.replace(outcome, error=f"queued prompt {prompt_id} ({text!r}){aside}: {error}")


def _housekeeping(ctx: RenderContext, render_id: int, picture_id: int) -> None:
    """After a stored picture: retention, a fresh database backup, drop the checkpoint folder.
    Retention keeps tonight's picture and the one on the panel: with every older picture a favourite
    (never deleted), tonight's was the only one it could take, and it went before it was shown."""
    shown = ctx.store.last_shown()
    policy = gallery.Retention(ctx.config.gallery.max_pictures, ctx.config.gallery.max_disk_mb)
    keep = {picture_id} | ({shown.picture_id} if shown else set())
    try:
        gallery.apply_retention(ctx.store, ctx.state_dir, policy, keep=keep)
        ctx.store.backup(backup_path(ctx.store.path))
    except (OSError, sqlite3.Error, FrameError) as exc:
        log.error("housekeeping after render %d failed: %s", render_id, exc)
    discard_job(ctx.state_dir, render_id)


def worker_output(outcome: Outcome, kind: type[OutputT], what: str) -> OutputT:
    """The result of a short worker job (show, info screen, preview), or FrameError saying ``what``
    failed and at which step."""
    if outcome.status != "done" or not isinstance(outcome.result, kind):
        raise FrameError(f"{what} failed at step {outcome.step or 'show'!r}: {outcome.error or outcome.status}")
    return outcome.result


class PictureDeleted(FrameError):
    """The picture to show was deleted before (or while) its show ran: not the panel's fault."""

    def __init__(self, picture_id: int) -> None:
        super().__init__(f"picture {picture_id} was deleted before it could be shown")


def show_picture(ctx: RenderContext, picture_id: int, reason: str) -> ShowOutput:
    """Send a stored picture to the panel in a worker (drivers and dithering stay out of the daemon).

    Returns the display's answer: ``status`` shown / unchanged / too-soon (then ``retry_at``) and
    ``shown`` (the virtual panel's PNG). Raises FrameError when the display step fails, and
    ``PictureDeleted`` when that is because the picture was deleted meanwhile (a show waits for the
    panel, a deletion does not wait for the show; its worker then found no file).
    """
    picture = ctx.store.picture(picture_id)
    if picture is None:
        raise PictureDeleted(picture_id)
    folder = Path(ctx.state_dir) / "checkpoints" / f"show-{picture_id}-{secrets.token_hex(4)}"
    make_dirs(folder)  # transient (swept at start), but it may be what creates checkpoints/
    panel = gallery.picture_path(ctx.state_dir, picture.panel_file)
    if ctx.panel_since and picture.created_at <= ctx.panel_since:
        panel = None  # dithered with panel options that have changed since: prepare it again
    write_job_files(folder, ctx.config, ShowJob(state_dir=Path(ctx.state_dir),
                                                image=gallery.picture_path(ctx.state_dir, picture.file),
                                                panel=panel))
    started = time.monotonic()
    try:
        outcome = _supervise(ctx, folder, None, 1, None, entry="show")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        result = worker_output(outcome, ShowOutput, f"showing picture {picture_id}")
    except FrameError:
        if ctx.store.picture(picture_id) is None:
            raise PictureDeleted(picture_id) from None
        raise
    if result.status == "too-soon":
        log.info("the panel declined picture %d: %s", picture_id, result.message)
        return result
    ctx.store.record_shown(picture_id, reason)
    ctx.status.update(shown={"picture_id": picture_id, "reason": reason, "since": now_iso(),  # as after a restart
                             "output": result.shown})
    log.info("showed picture %d (%s, %s) in %.1f s", picture_id, reason, result.status,
             time.monotonic() - started)
    return result


def run_night(config: Config, *, show: bool = True, progress: Callable[[dict], None] | None = None) -> NightResult:
    """Run one whole night synchronously (``frame demo``): choose, generate, prepare, store, show.

    Raises FrameError naming the step that failed or is not available yet; nothing is faked.
    """

    state = config_state_dir(config)
    store = Store.open(state)
    ctx = RenderContext(config=config, store=store, state_dir=state)
    if progress is not None:
        ctx.status.add_listener(lambda line: progress(ctx.status.snapshot()))
    try:
        render_id = store.start_render("now", None)
        outcome, picture_id = render(ctx, render_id, "now")
        if picture_id is None:
            step = f" at step {outcome.step!r}" if outcome.step else ""
            raise FrameError(f"the night's render {outcome.status}{step}: {outcome.error or 'no picture'}")
        shown = show_picture(ctx, picture_id, "demo").shown if show else None
        picture = store.picture(picture_id)
        return NightResult(
            picture_id=picture_id, render_id=render_id,
            image=gallery.picture_path(state, picture.file),
            panel=gallery.picture_path(state, picture.panel_file), shown=Path(shown) if shown else None,
            prompt=picture.prompt, theme=picture.theme, style=picture.style, restarts=outcome.restarts,
            seconds=(picture.timings or {}).get("total", 0.0), peak_rss_mb=outcome.peak_rss_mb)
    finally:
        store.close()
