"""glibc's allocator set for a daemon that runs for months with a few threads.

With its defaults, glibc gives each thread that allocates its own arena (up to 8 per core) and raises
its mmap threshold to the size of the largest block freed so far (up to 32 MiB). In the daemon, whose
waitress threads parse uploads and pages, both keep freed memory resident: after 12 uploads of 19.5
MB at once the daemon stayed at 60.3 MiB (49.6 MiB with the settings below, same run otherwise:
``benchmarks/daemon_memory.py --pages 300``, see docs/daemon.md), and the issue's soak grew in steps.

``tune_allocator`` is what ``MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072`` in the environment
would do, applied by ``frame run`` itself before its first thread starts, so it holds whether the
daemon runs under systemd, by hand or in a test. A fixed threshold returns every block of 128 KiB or
more to the system when it is freed. Elsewhere than glibc (musl, macOS) it does nothing.

Over hours, small objects matter more: ``use_system_malloc`` (Python's objects in glibc's heap instead
of pymalloc's arenas), ``settle_startup`` (startup objects frozen, interned strings' table grown) and
``upkeep`` (a full collection and ``malloc_trim`` every ``UPKEEP_SECONDS``) keep the page loads'
garbage from holding pymalloc arenas resident (docs/daemon.md, "No slow growth"). The re-executed daemon also
runs without glibc's per-thread caches (``NO_THREAD_CACHE``): each thread keeps up to 7 freed blocks
of every small size for itself, which ``malloc_trim`` never returns and which fill slowly over hours
(the soak's "live" bytes).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
from pathlib import Path

from frame.config import environment

log = logging.getLogger(__name__)

UPKEEP_SECONDS = 300.0  # how often the daemon's main loop collects and trims (``upkeep``)
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameters (malloc.h)
M_ARENA_MAX = -8
ARENA_MAX = 2
MMAP_THRESHOLD = 128 * 1024
INTERNED_CHURN = 88_000  # the entries of a 131,072-slot interned-string table, and then some
NO_THREAD_CACHE = "glibc.malloc.tcache_count=0"  # a GLIBC_TUNABLES item: read by the loader at exec only


def tune_allocator(arena_max: int = ARENA_MAX, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """Apply both settings; True when glibc took them."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return mallopt(M_ARENA_MAX, arena_max) == 1 and mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1


def settle_startup() -> int:
    """Collect once, then freeze what startup made (modules, the app, its templates): those objects
    live as long as the daemon, so the collector's full passes no longer walk them and its thresholds
    count only what the daemon makes afterwards. Returns the number of objects frozen.

    Why: every page load leaves reference cycles (werkzeug's URL matcher is a closure that refers to
    itself; a failing feed leaves its exception, traceback and frames). With the ~50,000 startup
    objects in the oldest generation, a full pass waits until a quarter as many again survive, so
    that garbage piles up for minutes and new pymalloc arenas are opened for it; freed later, they
    stay partly used and resident: part of the soak's slow growth (docs/daemon.md).
    It also grows the interned-string table to its lasting size first (``grow_interned_strings``)."""
    grow_interned_strings()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def grow_interned_strings(count: int = INTERNED_CHURN) -> None:
    """Intern ``count`` new strings and drop each at once, so CPython's table of interned strings is
    rebuilt now at the size the daemon's live interned strings call for, not an hour into a night.

    Why: interned strings come and go while the daemon serves pages (CPython interns, for example,
    names given to ``setattr``, and drops them when freed); each new one takes a fresh entry of the
    table, a freed one leaves its entry spent, and when the entries run out the table is rebuilt for three times the
    live strings, rounded up to a power of two. With the daemon's ~25,000-40,000 live strings that
    is 131,072 slots (1.9 MB) against startup's 65,536 (0.94 MB): every soak grew one step of +0.9 MiB
    40-50 minutes in, once, then stayed flat (found with tracemalloc: a 961,216-byte block allocated
    at an import, the size of a 65,536-slot table of string keys; docs/daemon.md). Churning here fills
    any table of up to 131,072 slots, so the rebuild happens during startup; after it, the table is
    rebuilt at the same size. About 40 ms."""
    tag = f"frame-startup-{os.getpid()}-"
    for index in range(count):
        sys.intern(tag + str(index))


def upkeep() -> int:
    """A full collection, then the free pages inside malloc's heap handed back (glibc
    ``malloc_trim(0)``; nothing elsewhere). Called every ``UPKEEP_SECONDS`` by the daemon's main loop:
    about 20 ms of CPU on this machine for the daemon's few thousand young objects. Returns the number
    of unreachable objects found."""
    found = gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return found
    trim.argtypes = (ctypes.c_size_t,)
    trim(0)
    return found


def frame_command_line(argv: list[str]) -> list[str] | None:
    """``argv`` (``sys.orig_argv``) when it starts frame's own command line (``python [flags] -m frame
    ...`` or the ``frame`` console script run by its interpreter), else None: a test or a program that
    imported ``cmd_run`` must never be replaced by ``exec``."""
    if "-m" in argv[1:]:
        at = argv.index("-m", 1)
        return argv if argv[at + 1:at + 2] == ["frame"] else None
    script = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
    return argv if script is not None and Path(script).name == "frame" else None


def use_system_malloc() -> None:
    """Run the daemon with ``PYTHONMALLOC=malloc``: re-execute ``frame run`` once with it (same PID,
    so systemd and the watchdog see no change), unless it already runs so or this process is not
    frame's command line (``frame_command_line``). The variable is then dropped from the environment
    the workers inherit: they live minutes, and pymalloc is faster for numpy's Python side.

    Why: pymalloc hands memory back only when a whole 1 MiB arena is empty. The daemon's page loads
    leave young objects and reference cycles scattered over arenas that also hold a few long-lived
    objects (a cache entry, a logged string), so arenas stay resident after their garbage is freed:
    with the upkeep alone the daemon still grew about 1.5 MiB/h under dense traffic. With glibc's
    malloc for Python's objects, ``upkeep``'s ``malloc_trim`` returns every free page inside the heap,
    whatever else the heap holds (``benchmarks/daemon_upkeep.py``, docs/daemon.md)."""
    if os.environ.pop(environment.SYSTEM_MALLOC, None) is not None:  # this is the re-executed daemon
        if os.environ.get("PYTHONMALLOC") == "malloc":
            del os.environ["PYTHONMALLOC"]
        worker_tunables = without_thread_cache(os.environ.get("GLIBC_TUNABLES", ""))
        if worker_tunables:
            os.environ["GLIBC_TUNABLES"] = worker_tunables
        else:
            os.environ.pop("GLIBC_TUNABLES", None)
        return
    argv = frame_command_line(list(sys.orig_argv))
    glibc = "glibc" in (os.confstr("CS_GNU_LIBC_VERSION") or "")
    if os.environ.get("PYTHONMALLOC") == "malloc" or argv is None or not glibc:
        return
    env = system_malloc_environment(dict(os.environ))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv[1:]], env)


def system_malloc_environment(environ: dict[str, str]) -> dict[str, str]:
    """The environment ``frame run`` re-executes itself with: Python's objects in glibc's malloc, and
    glibc's per-thread caches off (``NO_THREAD_CACHE`` added to the owner's own ``GLIBC_TUNABLES``).

    Why no thread cache: glibc keeps up to 7 freed blocks of each size up to 1 KiB in every thread
    for that thread alone; they count as in use, ``malloc_trim`` cannot return them, and with Python's
    objects in malloc the daemon's threads (the web server's, the scheduler's) fill theirs slowly as
    rarer sizes come by. Side by side for 25 minutes at the soak's traffic, the in-use heap grew
    +0.42 MiB with the caches and +0.08 MiB without (docs/daemon.md). The daemon is not
    allocation-bound, so the cache's speed is not missed."""
    tunables = [item for item in environ.get("GLIBC_TUNABLES", "").split(":") if item]
    if NO_THREAD_CACHE not in tunables:
        tunables.append(NO_THREAD_CACHE)
    return {**environ, "PYTHONMALLOC": "malloc", environment.SYSTEM_MALLOC: "1",
            "GLIBC_TUNABLES": ":".join(tunables)}


def without_thread_cache(tunables: str) -> str:
    """``GLIBC_TUNABLES`` as the owner had it, for the workers: this module's item taken out again
    (the workers live minutes and allocate hard; the cache speeds them up)."""
    return ":".join(item for item in tunables.split(":") if item and item != NO_THREAD_CACHE)

