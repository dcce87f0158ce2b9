"""Shared setup of the night tests against the fake render servers (``test_remote_night.py`` for
AUTOMATIC1111, ``test_comfy_night.py`` for ComfyUI): one place says how a test night is configured,
started and interrupted, so the two backends' tests differ only in what they check.

The contexts are opened by the ``open_night`` fixture (``tests/remote/conftest.py``), which closes
their stores after the test.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from frame.config.schema import RemoteRenderConfig
from frame.daemon.jobs import night
from frame.daemon.status import LiveStatus
from frame.daemon.store.database import Store
from tests.daemon.conftest import make_config

FAST = {"connect_timeout_seconds": 1.0, "poll_seconds": 0.1, "lost_after_seconds": 1.0, "size": "96x64"}
ON_THE_SERVER = "generating (remote)"  # the render's stage while the server paints
ON_THE_FRAME = "generating (unet)"  # ... and while the frame's own pipeline does


def night_context(tmp_path: Path, url: str, backend: str = "remote", **remote) -> night.RenderContext:
    """A daemon's render context on the demo model (64x64, 2 steps) with ``render.backend`` and a fast
    ``render.remote`` pointing at ``url``."""
    settings = RemoteRenderConfig(url=url, **{**FAST, **remote})
    config = make_config(tmp_path, model={"size": "64x64", "steps": 2}, display={"size": "80x48"},
                         render={"backend": backend, "remote": settings})
    return night.RenderContext(config, Store.open(tmp_path), tmp_path)


def render_queued(ctx: night.RenderContext, prompt: str = "a lighthouse in a storm", **kwargs):
    """Queue ``prompt`` and run a "now" render of it: (render id, outcome, picture id)."""
    ctx.store.queue_prompt(prompt)
    render_id = ctx.store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now", **kwargs)
    return render_id, outcome, picture_id


def stage(ctx: night.RenderContext) -> str | None:
    return (ctx.status.snapshot()["render"] or {}).get("stage")


class KillDuring:
    """A status listener that SIGKILLs the worker ``times`` times, each worker once, when the render
    reaches ``during`` (a crash mid-job: the supervisor restarts the worker); then calls ``after_last``.

    A fake server's job should outlast the kills (``after_last`` can shorten the jobs after them): a
    kill lands only once this process has read the worker's status line, and on a loaded machine (two
    pytest-xdist workers, worker processes, other jobs) a 1 s job was once over before the second kill.
    """

    def __init__(self, ctx: night.RenderContext, times: int = 1, during: str = ON_THE_SERVER,
                 after_last: Callable[[], None] | None = None) -> None:
        self.ctx, self.left, self.during, self.killed_pids = ctx, times, during, set()
        self.after_last = after_last

    def __call__(self, line: str) -> None:
        supervisor = self.ctx.supervisor
        pid = supervisor.pid if supervisor else None
        if pid and self.left and stage(self.ctx) == self.during and pid not in self.killed_pids:
            self.killed_pids.add(pid)
            self.left -= 1
            os.kill(pid, signal.SIGKILL)
            if not self.left and self.after_last:
                self.after_last()


def stop_while_on_the_server(ctx: night.RenderContext) -> None:
    """Ask the daemon to stop (as on SIGTERM) once the server is painting."""

    def stop(line: str) -> None:
        if stage(ctx) == ON_THE_SERVER:
            ctx.stop.set()

    ctx.status.add_listener(stop)


def restart_daemon(ctx: night.RenderContext) -> None:
    """The restarted daemon: a fresh status (without the listeners) and no stop request."""
    ctx.status = LiveStatus()
    ctx.stop = threading.Event()
