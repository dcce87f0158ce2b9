"""The entry point every short child shares (``frame.worker.imagechild``, ``frame.worker.checkchild``):
read the job from the one argument, cap the child's own memory, run, and answer with one line.

The cap comes in the job (``cap_mb``), set by the daemon, which also watches the child's resident
memory (``frame.daemon.jobs.children``). An image child, which loads Pillow and no numpy, caps its
address space (``RLIMIT_AS``) before it decodes anything: Pillow allocates what it decodes, so an
image the header checks let through and that still does not fit fails with MemoryError in the
child, never in the daemon. A numpy child (the checks) is capped by the daemon's poll only: numpy and
OpenBLAS reserve address space far beyond what they touch (``frame.daemon.jobs.supervisor``).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable

from frame.worker.shortjobs import EXIT_REFUSED, ChildJob, ChildOutput, child_job_from_json, done_line, error_line

_PR_SET_PDEATHSIG = 1


class Refused(Exception):
    """The input cannot be used; the message is for the owner (it is shown as it is)."""


def own_status_mb(field: str) -> float:
    """``VmHWM`` (own peak) or ``VmRSS`` of this process in MiB, from /proc/self/status (0 if unknown)."""
    try:
        with open("/proc/self/status") as status:
            return next((int(line.split()[1]) / 1024 for line in status if line.startswith(field + ":")), 0.0)
    except OSError:
        return 0.0


def die_with_the_daemon() -> None:
    """A killed daemon leaves no orphan child decoding, and the OOM killer's first choice is the child
    (as for the render worker). Also called by ``frame estimate`` when the daemon runs it (the settings
    page's button, ``frame.daemon.jobs.estimate_child``)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    # read and forgotten: FRAME_* variables are configuration layers to the checks ("file")
    parent = int(os.environ.pop("FRAME_PARENT_PID", "0") or 0)
    if parent and os.getppid() != parent:
        os._exit(1)
    try:  # if the machine runs out of memory anyway, the kernel kills a child, never the daemon
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def cap_address_space(cap_mb: int) -> None:
    """Limit this process's address space to ``cap_mb`` MiB (a Pillow-only child: see the module)."""
    limit = cap_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def child_main(argv: list[str], run: Callable[[ChildJob], ChildOutput], *, cap_address: bool) -> int:
    """Exit 0 with the done line, 3 with a refusal's line (the message for the owner), 1 for a
    failure, 2 for a bad call."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m frame.worker.<child> JOB_JSON\n")
        return 2
    try:
        job = child_job_from_json(json.loads(argv[0]))
    except ValueError as exc:
        sys.stderr.write(f"unreadable job: {exc}\n")
        return 2
    die_with_the_daemon()
    cap_mb = job.limits.cap_mb if hasattr(job, "limits") else job.cap_mb
    if cap_address:
        cap_address_space(cap_mb)
    started = time.monotonic()
    try:
        result = run(job)
    except Refused as exc:
        print(error_line(job.kind, str(exc)), flush=True)
        return EXIT_REFUSED
    except MemoryError:
        print(error_line(job.kind, f"needs more memory than the frame gives it ({cap_mb} MiB)"), flush=True)
        return EXIT_REFUSED
    except Exception as exc:  # noqa: BLE001 - one line for the daemon, which logs it
        print(error_line(job.kind, f"{type(exc).__name__}: {exc}"), flush=True)
        return 1
    print(done_line(result, time.monotonic() - started, own_status_mb("VmHWM")), flush=True)
    return 0
