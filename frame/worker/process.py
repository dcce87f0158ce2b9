"""What every worker process shares: ``python -m frame.worker.render|show|infoscreen JOB_DIR``.

Everything heavy (numpy engine, scikit-learn taste model, panel dithering, display drivers) runs here,
never in the daemon. The worker:

* lowers its priority (``worker.nice``) and volunteers as the kernel OOM killer's first victim
  (``oom_score_adj`` 1000), and dies with the daemon (``PR_SET_PDEATHSIG``), so an OOM or crash
  never takes the daemon down and no orphan keeps rendering;
* holds ``<state_dir>/render.lock`` (``flock``) for its lifetime when rendering: only one render at a
  time, even across a daemon restart; a show job holds ``panel.lock`` instead, so a button press or a
  scheduled show is not held up for hours by the night's render, yet two refreshes never share the bus;
* reads ``JOB_DIR/job.json`` and ``JOB_DIR/config.yaml``, runs the job's steps (``render.py`` for a
  render job, ``show.py`` for a show job; the daemon starts the module for the job's kind) — each
  step skipped when its output is already in JOB_DIR, the generation resuming from the diffusion
  pipeline's per-step checkpoint — and reports on stdout, one JSON object per line:
  ``{"event": "stage"|"progress"|"error"|"done", ...}``.

Exit codes: 0 done, 3 a permanent error (a missing part, bad model: restarting cannot help),
143 stopped by SIGTERM, anything else (or a signal) is a crash the supervisor may retry.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frame.config import environment, load_config
from frame.config.schema import Config
from frame.errors import FrameError
from frame.worker.errors import StepFailed, StepUnavailable
from frame.worker.events import DoneEvent, ErrorEvent, Event, Output, StageEvent, event_line
from frame.worker.records import EXIT_PERMANENT, EXIT_STOPPED, Job, JobUnreadable, read_job

log = logging.getLogger(__name__)

Emit = Callable[[Event], None]
# A job's steps: (job, config, job_dir, emit) -> the output the daemon publishes.
JobSteps = Callable[[Any, Config, Path, Emit], Output]

LOCK_NAME = "render.lock"
PANEL_LOCK_NAME = "panel.lock"
_PR_SET_PDEATHSIG = 1


class Stopped(BaseException):
    """Raised in the main thread by SIGTERM; the last finished step's checkpoint is already on disk."""


def emit(event: Event) -> None:
    """One protocol line for the supervisor (stdout is the protocol channel, logs go to stderr)."""
    sys.stdout.write(event_line(event) + "\n")
    sys.stdout.flush()


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies (``PR_SET_PDEATHSIG``), and exit now if the
    parent ``parent`` is already gone; the render worker and its taste child both call it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if parent and os.getppid() != parent:  # the daemon died before prctl took effect
        os._exit(EXIT_STOPPED)


def limit_self(nice: int) -> None:
    """Lower priority to ``nice`` and make this process the OOM killer's first choice."""
    current = os.nice(0)
    if nice > current:
        os.nice(nice - current)
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass


def take_lock(state_dir: Path, name: str = LOCK_NAME) -> int:
    """Block until no other worker holds the lock file ``name``; the lock dies with this process."""
    fd = os.open(state_dir / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        waiting_for = "render" if name == LOCK_NAME else "panel refresh"
        emit(StageEvent(f"waiting for another {waiting_for} to finish"))
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def peak_rss_mb() -> float:
    """This process's own peak resident set (``VmHWM``): ``ru_maxrss`` would carry the daemon's peak
    over the exec that started this worker."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Stopped()


def _read_job(job_dir: Path, kind: str) -> Job | str:
    """The job in ``job_dir``, or why there is none usable (a permanent error)."""
    try:
        job = read_job(job_dir)
    except JobUnreadable as exc:
        return f"no readable job description in {job_dir} ({exc})"
    if job is None:
        return f"no readable job description in {job_dir}"
    if job.kind != kind:
        return f"{job_dir} holds a {job.kind!r} job, not a {kind!r} job"
    return job


def run_job(job_dir: Path, kind: str, run_steps: JobSteps) -> int:
    """Run the ``kind`` job in ``job_dir`` with ``run_steps``; return the exit code."""

    job = _read_job(job_dir, kind)
    if isinstance(job, str):
        emit(ErrorEvent("job", job))
        return EXIT_PERMANENT
    config = load_config(job_dir / "config.yaml", environ={})
    limit_self(config.worker.nice)
    take_lock(job.state_dir, LOCK_NAME if kind != "show" else PANEL_LOCK_NAME)
    started = time.monotonic()
    result = run_steps(job, config, job_dir, emit)
    emit(DoneEvent(result, round(time.monotonic() - started, 2), round(peak_rss_mb(), 1)))
    return 0


def configure_logging() -> None:
    """Worker log lines go to stderr, inherited from the daemon (the journal under systemd); stdout
    carries the JSON events to the supervisor. With ``FRAME_WORKER_LOG_FILE`` (``frame demo``) they are
    appended to that file instead, and stderr keeps the warnings: the demo's summary is not buried."""
    level = os.environ.get(environment.WORKER_LOG, "INFO")
    form = "worker %(levelname)s %(name)s: %(message)s"
    path = os.environ.get(environment.WORKER_LOG_FILE)
    if not path:
        logging.basicConfig(stream=sys.stderr, level=level, format=form)
        return
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setLevel(logging.WARNING)
    handlers: list[logging.Handler] = [terminal]
    try:
        handlers.append(logging.FileHandler(path, encoding="utf-8"))
    except OSError as exc:  # the file cannot be written: the terminal gets everything, as before
        terminal.setLevel(logging.NOTSET)
        print(f"worker: cannot log to {path} ({exc.strerror or exc}); logging to stderr", file=sys.stderr)
    logging.basicConfig(handlers=handlers, level=level, format=form)


def main(argv: list[str] | None, kind: str, run_steps: JobSteps) -> int:
    """The worker's life around ``run_steps``: logging, dying with the daemon, SIGTERM, exit codes."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.stderr.write("usage: python -m frame.worker.render|show|infoscreen JOB_DIR\n")
        return 2
    configure_logging()
    die_with_parent(int(os.environ.get(environment.PARENT_PID, "0") or 0))
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return run_job(Path(argv[0]), kind, run_steps)
    except Stopped:
        log.info("stopped by SIGTERM; the job resumes from its last checkpoint")
        return EXIT_STOPPED
    except StepFailed as exc:
        if not exc.permanent:  # maybe transient (MemoryError, I/O): the supervisor retries
            log.error("render step failed", exc_info=exc.cause)
        emit(ErrorEvent(exc.step, exc.message()))
        return EXIT_PERMANENT if exc.permanent else 1
    except FrameError as exc:  # outside the render steps: the job's configuration, a show job
        emit(ErrorEvent(exc.step if isinstance(exc, StepUnavailable) else "render", str(exc)))
        return EXIT_PERMANENT
    except Exception as exc:  # maybe transient (MemoryError, I/O): the supervisor retries
        log.exception("render step failed")
        emit(ErrorEvent("render", f"{type(exc).__name__}: {exc}"))
        return 1



def job_dir_child_main(argv: list[str], name: str, work: Callable[[Path], None], *, log_errors: bool = True) -> int:
    """The entry point of the render worker's own short children (``frame.worker.tastechild``,
    ``embedchild``, ``plotchild``): one job folder as the only argument, dies with the worker that
    waits for it, ``work(job_dir)``; exit 0 with the child's own peak memory and CPU time on stdout,
    3 (``EXIT_PERMANENT``) for a FrameError, 1 for anything else, the error's one line on stderr (the
    worker reports it as its step's failure), 2 for a bad call."""
    if len(argv) != 1:
        sys.stderr.write(f"usage: python -m frame.worker.{name} JOB_DIR\n")
        return 2
    die_with_parent(os.getppid())  # a worker killed meanwhile leaves no orphan child working
    if log_errors:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=f"{name} %(levelname)s: %(message)s")
    try:
        work(Path(argv[0]))
    except FrameError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_PERMANENT
    except Exception as exc:  # noqa: BLE001 - one line for the worker, which reports it as the step's failure
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"peak_rss_mb": round(peak_rss_mb(), 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}))
    return 0
