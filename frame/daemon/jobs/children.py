"""Short children of the worker kind for the phone page: an upload decoded, thumbnails made, the
settings checked against the model's graph. The daemon never imports numpy, onnx or Pillow
(``tests/test_layers.py``); it hands each such job to a child (``frame.worker.shortjobs`` is the
contract) and waits for its one-line answer.

Bounds, so that nothing the owner (or anyone on the LAN) does multiplies memory:

* one child of each kind at a time (``SLOTS``): twelve uploads at once decode one after another, and a
  request that waits longer than ``WAIT_SECONDS`` gets ``ChildBusy`` ("try again in a minute");
* each child under its own cap: the image child caps its own address space (Pillow only, so the cap
  is what it can touch), and the daemon polls every child's resident memory and kills one above its
  cap (the check child imports numpy, whose reserved address space makes RLIMIT_AS useless, as the
  supervisor's docstring explains); a killed child is a failure with the cap in its message;
* a time limit per job;
* none while a render worker chooses tonight's picture (``wait_while_choosing``): its taste, embedding
  and plot children are the night's largest processes beside the waiting worker (the Pi twin's taste
  child 225 MiB beside the worker's 81 and the daemon's), and a settings check or an upload started
  then took the cgroup over a Pi's budget; the request waits, up to its wait, for the render to
  load its model.

Each child's own peak (``VmHWM``) is logged with its cap, so a benchmark can check them
(``benchmarks/daemon_memory.py``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import BinaryIO

from frame.daemon.jobs.supervisor import rss_mb, running_stages, running_workers, worker_command, worker_env
from frame.errors import FrameError
from frame.worker.shortjobs import ENTRY, EXIT_REFUSED, ChildJob, ChildOutput, PhotoJob, parse_answer

log = logging.getLogger(__name__)

# The image child's cap (MiB of address space): its interpreter and Pillow (~25 MiB), the decode
# budget ``IMAGE_DECODE_BYTES`` and the reduced copies made while the full-size pixels are still held.
IMAGE_CAP_MB = 176
IMAGE_DECODE_BYTES = 100_000_000  # a 24-megapixel PNG (4 bytes a pixel in Pillow) fits, 25 does not
# The check child's cap (MiB resident): numpy, onnx and the UNet's graph without weights (61 MiB
# measured on the demo model, x86); a full SD 1.5 graph adds its nodes, not its weights.
CHECK_CAP_MB = 192
# Beside a render worker (the Pi's memory plan, docs/pi-twin.md) an upload is stored at most 2000 px
# a side, not 2048: a 4000-px phone JPEG then decodes at half scale in the decoder (``draft`` keeps
# the long side >= max_side), 146 -> 51 MiB resident for a 12 MP photo (x86). It decodes at most
# 24 MB of pixels (a 6 MP PNG or WebP; JPEGs up to 48 MP fit through the reduced decoding) under a
# 128 MiB address space: about 90 MiB resident at worst, so daemon (<= 54) + demo render worker (149)
# + this child stay near the 291.6 MiB a Pi Zero 2 W leaves frame.
RENDER_IMAGE_CAP_MB = 128
RENDER_DECODE_BYTES = 24_000_000
RENDER_MAX_SIDE = 2000
BESIDE_RENDER = ("while tonight's picture is being painted the frame keeps memory for it and decodes "
                 "less at once; send it again when the picture is done")
WAIT_SECONDS = 60.0
POLL_SECONDS = 0.05
CHOOSING = "choosing"  # the render stage whose children leave no room (``frame.worker.render``)
SLOTS = {entry: threading.BoundedSemaphore(1) for entry in set(ENTRY.values())}


class ChildBusy(FrameError):
    """Another child of the same kind held the slot for longer than the request may wait."""


class ChildFailed(FrameError):
    """The child refused the input (``refused``: its message is for the owner as it is) or failed."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def cap_of(job: ChildJob) -> int:
    return job.limits.cap_mb if hasattr(job, "limits") else job.cap_mb


def render_running() -> bool:
    """Whether this daemon runs a render worker now (``supervisor.running_workers``)."""
    return any(module.endswith(".render") for module in running_workers())


def limits_beside_render(job: ChildJob) -> ChildJob:
    """``job`` with the image limits that fit beside a render worker (``RENDER_IMAGE_CAP_MB``,
    ``RENDER_DECODE_BYTES``, ``RENDER_MAX_SIDE``), never above its own; other jobs unchanged: the
    check child reads no graph (35 MiB, x86) and thumbnails are of pictures the frame made."""
    if not isinstance(job, PhotoJob):
        return job
    limits = job.limits
    return replace(job, max_side=min(job.max_side, RENDER_MAX_SIDE),
                   limits=replace(limits, cap_mb=min(limits.cap_mb, RENDER_IMAGE_CAP_MB),
                                  decode_bytes=min(limits.decode_bytes, RENDER_DECODE_BYTES)))


def wait_while_choosing(wait: float, poll: float = 0.2) -> bool:
    """Wait, up to ``wait`` seconds, while a render worker is in its choosing stage; True when none
    is (any more), False when the wait ran out."""
    deadline = time.monotonic() + wait
    while CHOOSING in running_stages():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


def run_child(job: ChildJob, *, timeout: float, stdin: BinaryIO | None = None,
              wait: float = WAIT_SECONDS) -> ChildOutput:
    """Run ``job`` in its child (one of each kind at a time) and return the result. ``stdin``: a real
    file the child reads (an upload's temporary file), never copied through the daemon. While a
    render worker runs, an upload is decoded under ``limits_beside_render``; one that needs more is
    refused with ``BESIDE_RENDER`` added to the child's message."""
    entry = ENTRY[job.kind]
    if not SLOTS[entry].acquire(timeout=wait):
        raise ChildBusy(f"the frame is busy with another {'picture' if entry == 'imagechild' else 'check'}; "
                        "try again in a minute")
    try:
        if not wait_while_choosing(wait):
            raise ChildBusy("the frame is choosing tonight's picture and needs its memory for that; "
                            "try again in a minute")
        beside = limits_beside_render(job) if render_running() else job
        try:
            return _run(entry, beside, timeout, stdin)
        except ChildFailed as exc:
            if beside is job or not exc.refused:
                raise
            raise ChildFailed(f"{exc}; {BESIDE_RENDER}", refused=True) from exc
    finally:
        SLOTS[entry].release()


def watch_child(proc: subprocess.Popen, cap_mb: float, cap_name: str, time_limit: float, poll_seconds: float,
                also_stop: Callable[[], str | None] | None = None) -> tuple[str | None, str | None, str | None, float]:
    """Wait for ``proc`` to end, reading its resident memory every ``poll_seconds``; kill it above
    ``cap_mb`` (named ``cap_name`` in the reason), after ``time_limit`` seconds, or when ``also_stop()``
    names a reason. Returns its stdout, stderr, why it was stopped (None: it ended by itself) and the
    highest resident memory polled (MiB)."""
    started = time.monotonic()
    stopped, polled = None, 0.0
    while True:
        try:
            out, err = proc.communicate(timeout=poll_seconds)
            return out, err, stopped, polled
        except subprocess.TimeoutExpired:
            rss = rss_mb(proc.pid) or 0.0
            polled = max(polled, rss)
            if rss > cap_mb:
                stopped = f"it used {rss:.0f} MiB, more than {cap_name}"
            elif also_stop is not None and (reason := also_stop()):
                stopped = reason
            elif time.monotonic() - started > time_limit:
                stopped = f"it took more than {time_limit:.0f} s"
            if stopped:
                proc.kill()


def _run(entry: str, job: ChildJob, timeout: float, stdin: BinaryIO | None) -> ChildOutput:
    cap = cap_of(job)
    env = worker_env()
    env["OPENBLAS_NUM_THREADS"] = "1"  # the checks multiply nothing: no BLAS thread pool and its buffers
    started = time.monotonic()
    proc = subprocess.Popen([*worker_command(entry), json.dumps(job.to_json())],
                            stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, close_fds=True, text=True)
    out, err, stopped, polled = watch_child(proc, cap, f"its cap of {cap} MiB", timeout, POLL_SECONDS)
    answer = parse_answer(out)
    seconds = time.monotonic() - started
    if stopped:
        log.error("%s (%s) stopped: %s", entry, job.kind, stopped)
        raise ChildFailed(f"the {job.kind} job was stopped: {stopped}")
    if answer is not None and answer.result is not None and proc.returncode == 0:
        log.info("%s: %s in %.2f s, peak %.1f MiB of its %d MiB cap", entry, job.kind, seconds,
                 max(answer.peak_rss_mb, polled), cap)
        return answer.result
    if answer is not None and proc.returncode == EXIT_REFUSED:
        log.info("%s: %s refused: %s", entry, job.kind, answer.message)
        raise ChildFailed(answer.message, refused=True)
    lines = (err or "").strip().splitlines()
    reason = answer.message if answer is not None else (lines[-1] if lines else f"exit status {proc.returncode}")
    log.error("%s (%s) failed: %s", entry, job.kind, reason)
    raise ChildFailed(f"the {job.kind} job failed: {reason}")
