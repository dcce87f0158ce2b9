"""Running a worker process and keeping it alive: restart after a crash (up to ``worker.max_restarts``),
enforce the memory limit, honour the deadline and a stop request.

Memory limit: the supervisor polls the worker's resident set (``VmRSS`` in ``/proc/PID/status``) and
SIGKILLs it above ``worker.memory_limit_mb``; the restarted worker resumes from its checkpoint. An
address-space limit (RLIMIT_AS) is deliberately not used: numpy/OpenBLAS reserve large per-thread
virtual regions and the engine memory-maps weight files, both count fully against RLIMIT_AS although
little of it is resident, so such a limit fails healthy renders at random. The worker also sets
``oom_score_adj`` 1000 so that if the whole machine runs out first the kernel kills the worker and
never the daemon (and the unit's ``OOMPolicy=continue`` keeps the service up).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import frame
from frame.config import environment
from frame.worker.events import DoneEvent, ErrorEvent, Event, Output, ProgressEvent, StageEvent, parse_event
from frame.worker.records import EXIT_PERMANENT

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 6.0


OutcomeStatus = Literal["done", "failed", "deadline", "stopped"]
# What the supervisor hands its listener: the worker's stage and progress (an error or the result
# is the outcome's, never a progress update: an error's step is a step *name*).
StatusEvent = StageEvent | ProgressEvent


@dataclass(frozen=True)
class Outcome:
    """How a supervised job ended: ``done``, ``failed``, ``deadline`` or ``stopped``."""

    status: OutcomeStatus
    result: Output | None = None
    error: str | None = None
    step: str | None = None
    restarts: int = 0
    peak_rss_mb: float = 0.0
    events: tuple[Event, ...] = ()


@dataclass
class _Tally:
    """What the supervisor gathers while the worker runs (across restarts); frozen into an Outcome."""

    result: Output | None = None
    error: str | None = None
    step: str | None = None
    restarts: int = 0
    peak_rss_mb: float = 0.0
    events: list[Event] = field(default_factory=list)

    def outcome(self, status: OutcomeStatus) -> Outcome:
        return Outcome(status, self.result, self.error, self.step, self.restarts, self.peak_rss_mb,
                       tuple(self.events))


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` in MiB (None when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def worker_env() -> dict[str, str]:
    """The worker's environment: found by ``-m`` even from a source checkout, one malloc arena pair."""
    env = dict(os.environ)
    package_root = str(Path(frame.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env[environment.PARENT_PID] = str(os.getpid())  # not a setting: environment.NOT_SETTINGS
    env.setdefault("MALLOC_ARENA_MAX", "2")
    env.pop("NOTIFY_SOCKET", None)  # only the daemon talks to systemd
    return env


def worker_command(entry: str) -> list[str]:
    """The command of worker ``entry`` (``render``, ``show`` or ``infoscreen``: ``frame/worker/``); the
    daemon names it as a string and never imports the worker's modules."""
    return [sys.executable, "-m", f"frame.worker.{entry}"]


_RUNNING: dict[int, str] = {}  # pid -> the command's module (frame.worker.render, ...), while it runs
_STAGES: dict[int, str] = {}   # pid -> the stage the worker last said it entered, while it runs
_RUNNING_LOCK = threading.Lock()


def running_workers() -> list[str]:
    """The modules of the workers this daemon runs now (``frame.worker.render``, ``frame.worker.show``):
    the short children size themselves by them (``children.limits_beside``)."""
    with _RUNNING_LOCK:
        return list(_RUNNING.values())


def running_stages() -> list[str]:
    """The stage each worker this daemon runs now last entered ("choosing", "loading model", ...):
    the short children wait while a render chooses (``children.wait_while_choosing``)."""
    with _RUNNING_LOCK:
        return list(_STAGES.values())


class Supervisor:
    """Runs ``command JOB_DIR`` (default: the render worker, ``worker_command("render")``) until it
    finishes, restarting it after crashes."""

    def __init__(self, memory_limit_mb: float, max_restarts: int, *,
                 on_event: Callable[[StatusEvent], None] | None = None,
                 on_restart: Callable[[int, str], None] | None = None, poll_seconds: float = 0.2,
                 command: list[str] | None = None) -> None:
        self.memory_limit_mb = memory_limit_mb
        self.max_restarts = max_restarts
        self.on_event = on_event or (lambda event: None)
        self.on_restart = on_restart or (lambda count, reason: None)
        self.poll_seconds = poll_seconds
        self.command = command or worker_command("render")
        self.pid: int | None = None  # the current worker (tests kill it on purpose)

    def run(self, job_dir: Path, *, stop: threading.Event, deadline: float | None = None) -> Outcome:
        """Supervise the job until done, failed for good, past ``deadline`` (epoch seconds) or stopped."""
        tally = _Tally()
        while True:
            status, reason = self._attempt(job_dir, stop, deadline, tally)
            if status != "crashed":
                return tally.outcome(status)
            if tally.restarts >= self.max_restarts:
                last = f" ({tally.error})" if tally.error else ""
                tally.error = f"the worker died {tally.restarts + 1} times; last: {reason}{last}"
                return tally.outcome("failed")
            tally.restarts += 1
            log.warning("render worker died (%s); restart %d of %d resumes from its checkpoint",
                        reason, tally.restarts, self.max_restarts)
            self.on_restart(tally.restarts, reason)

    def _attempt(self, job_dir: Path, stop: threading.Event, deadline: float | None,
                 outcome: _Tally) -> tuple[str, str]:
        proc = subprocess.Popen([*self.command, str(job_dir)],
                                stdout=subprocess.PIPE, env=worker_env(), close_fds=True)
        self.pid = proc.pid
        with _RUNNING_LOCK:
            _RUNNING[proc.pid] = self.command[-1]
        try:
            return self._watch(proc, job_dir, stop, deadline, outcome)
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(proc.pid, None)
                _STAGES.pop(proc.pid, None)

    def _watch(self, proc: subprocess.Popen, job_dir: Path, stop: threading.Event, deadline: float | None,
               outcome: _Tally) -> tuple[str, str]:
        reader = threading.Thread(target=self._read_events, args=(proc, outcome), daemon=True)
        reader.start()
        ended_by = None
        while proc.poll() is None:
            stop.wait(self.poll_seconds)
            rss = rss_mb(proc.pid)
            if rss is not None:
                outcome.peak_rss_mb = max(outcome.peak_rss_mb, rss)
            if stop.is_set():
                ended_by = "stopped"
            elif deadline is not None and time.time() > deadline:
                ended_by = "deadline"
            elif rss is not None and rss > self.memory_limit_mb:
                log.error("render worker uses %.0f MiB > worker.memory_limit_mb=%d; killing it",
                          rss, self.memory_limit_mb)
                proc.kill()
                ended_by = f"memory limit ({rss:.0f} MiB)"
                break
            if ended_by in ("stopped", "deadline"):
                self._terminate(proc)
                break
        proc.wait()
        reader.join(timeout=30)  # the pipe closes with the worker; the last lines may still be queued
        self.pid = None
        return self._classify(proc.returncode, ended_by, outcome)

    def _classify(self, code: int, ended_by: str | None, outcome: _Tally) -> tuple[str, str]:
        if ended_by in ("stopped", "deadline"):
            return ended_by, ended_by
        if code == 0 and outcome.result is not None:
            return "done", ""
        if code == EXIT_PERMANENT:
            return "failed", outcome.error or "permanent error"
        reason = ended_by or (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}")
        return "crashed", reason

    def _terminate(self, proc: subprocess.Popen) -> None:
        """SIGTERM (the worker stops at once; its last step checkpoint is on disk), SIGKILL if slow."""
        proc.terminate()
        try:
            proc.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("render worker ignored SIGTERM for %.0f s; killing it", STOP_GRACE_SECONDS)
            proc.kill()

    def _read_events(self, proc: subprocess.Popen, outcome: _Tally) -> None:
        for raw in proc.stdout:
            event = parse_event(raw)
            if event is None:
                log.debug("worker wrote a non-protocol line: %r", raw[:200])
                continue
            if isinstance(event, DoneEvent):
                outcome.result = event.result
                outcome.peak_rss_mb = max(outcome.peak_rss_mb, event.peak_rss_mb)
            elif isinstance(event, ErrorEvent):
                outcome.error, outcome.step = event.message, event.step
            if not isinstance(event, ProgressEvent):
                outcome.events.append(event)
            if isinstance(event, StageEvent):
                with _RUNNING_LOCK:
                    if proc.pid in _RUNNING:
                        _STAGES[proc.pid] = event.stage
            if isinstance(event, StageEvent | ProgressEvent):
                self._tell(event)
        proc.stdout.close()

    def _tell(self, event: StatusEvent) -> None:
        try:
            self.on_event(event)
        except Exception:
            log.exception("progress listener failed")
