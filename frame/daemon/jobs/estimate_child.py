"""The settings page's "Estimate now" button: ``frame estimate`` run in a child.

The estimate counts the model's graph (numpy and onnx; about 105 MB for an SD 1.5 UNet) and measures
this machine through the engine, so it never runs in the daemon (the daemon imports no numpy,
onnx or Pillow). The button hands it to ``python -m frame --config FILE estimate --state-dir STATE``,
the same code path as the command the page used to tell the owner to type, which writes
``<state_dir>/estimate.json``; the card shows that file.

Bounds, as for the other children (``frame.daemon.jobs.children``):

* one estimate at a time (``EstimateBusy`` for a second press while one runs);
* never beside a render: both would compete for the Pi's 512 MB. A press during a render is refused,
  and a render that starts while the estimate runs stops the estimate (the night has priority);
* the child's resident memory is polled and the child is killed above the worker's memory limit
  (``worker.memory_limit_mb``: the estimate holds less than a render), or after ``TIME_LIMIT`` seconds.

The configuration the child reads is exactly the running one (the owner's saved settings included),
written with its secrets into a private job folder that is removed when the child ends, as for a worker.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from frame.atomicfile import make_dirs, write_bytes_atomic
from frame.config.loader import to_plain
from frame.config.schema import Config
from frame.daemon.jobs.children import watch_child
from frame.daemon.jobs.supervisor import worker_env
from frame.errors import FrameError

log = logging.getLogger(__name__)

MEASURE_SECONDS = 5.0  # as tonight's step choice (frame.worker.step_choice): a few step kinds probed
TIME_LIMIT = 30 * 60.0  # counting an SDXL UNet on a Pi Zero 2 takes minutes
POLL_SECONDS = 0.2
ORIGIN = "the settings page"


class EstimateBusy(FrameError):
    """An estimate is already running, or a render is (both would compete for the frame's memory)."""


def estimate_command(config_file: Path, state_dir: Path, measure_seconds: float) -> list[str]:
    """The child: ``frame estimate`` on ``config_file``, saving its figures in ``state_dir``."""
    return [sys.executable, "-m", "frame", "--config", str(config_file), "estimate", "--state-dir", str(state_dir),
            "--measure-seconds", str(measure_seconds), "--origin", ORIGIN]


class EstimateRunner:
    """Runs at most one estimate child at a time, in a thread, and remembers how the last one ended.

    ``rendering``: whether a render is running now (asked before starting and while the child runs)."""

    def __init__(self, rendering: Callable[[], bool], measure_seconds: float = MEASURE_SECONDS,
                 time_limit: float = TIME_LIMIT) -> None:
        self.rendering = rendering
        self.measure_seconds = measure_seconds
        self.time_limit = time_limit
        self._lock = threading.Lock()
        self._running_since: float | None = None
        self._error: str | None = None

    def state(self) -> dict[str, Any]:
        """``running`` (since when, epoch seconds, or None) and the last run's ``error`` (or None)."""
        with self._lock:
            return {"running": self._running_since, "error": self._error}

    def start(self, config: Config, state_dir: Path) -> None:
        """Start the estimate of ``config`` in a child; EstimateBusy while one or a render runs."""
        with self._lock:
            if self._running_since is not None:
                raise EstimateBusy("an estimate is already running; its result appears on this page")
            if self.rendering():
                raise EstimateBusy("not while a render is running: both would compete for the frame's memory. "
                                   "Try again when it has finished")
            self._running_since = time.time()
            self._error = None
        thread = threading.Thread(target=self._run, args=(config, Path(state_dir)), name="estimate", daemon=True)
        try:
            thread.start()
        except BaseException:
            self._finish("the estimate could not start")
            raise

    def _finish(self, error: str | None) -> None:
        with self._lock:
            self._running_since = None
            self._error = error

    def _run(self, config: Config, state_dir: Path) -> None:
        error: str | None = "internal error (see the log)"
        folder = state_dir / "checkpoints" / f"child-estimate-{threading.get_ident()}"
        try:
            make_dirs(folder)
            plain = to_plain(config, reveal_secrets=True)
            plain["web"]["token"] = ""  # the estimate never needs the owner token
            write_bytes_atomic(folder / "config.yaml",
                               yaml.safe_dump(plain, sort_keys=True, allow_unicode=True).encode())
            error = self._child(estimate_command(folder / "config.yaml", state_dir, self.measure_seconds),
                                config.worker.memory_limit_mb)
        except Exception:
            log.exception("the estimate child could not run")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            self._finish(error)

    def _child(self, command: list[str], cap_mb: float) -> str | None:
        """Run the child to its end; None when it succeeded, else why not (for the page)."""
        started = time.monotonic()
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=worker_env(), close_fds=True, text=True)
        _, err, stopped, peak = watch_child(
            proc, cap_mb, f"the worker limit of {cap_mb:.0f} MiB", self.time_limit, POLL_SECONDS,
            also_stop=lambda: "a render started, and the night has priority" if self.rendering() else None)
        seconds = time.monotonic() - started
        if stopped:
            log.warning("estimate child stopped: %s", stopped)
            return f"stopped: {stopped}"
        if proc.returncode != 0:
            lines = (err or "").strip().splitlines()
            reason = lines[-1] if lines else f"exit status {proc.returncode}"
            log.error("estimate child failed: %s", reason)
            return reason
        log.info("estimate child: done in %.1f s, peak %.0f MiB (polled)", seconds, peak)
        return None
