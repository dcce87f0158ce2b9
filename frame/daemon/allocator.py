"""glibc's allocator set for a daemon that runs for months with a few threads (issue 27).

With its defaults, glibc gives each thread that allocates its own arena (up to 8 per core) and raises
its mmap threshold to the size of the largest block freed so far (up to 32 MiB). In the daemon, whose
waitress threads parse uploads and pages, both keep freed memory resident: after 12 uploads of 19.5
MB at once the daemon stayed at 60.3 MiB (49.6 MiB with the settings below, same run otherwise:
``benchmarks/daemon_memory.py --pages 300``, see docs/daemon.md), and the issue's soak grew in steps.

``tune_allocator`` is what ``MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072`` in the environment
would do, applied by ``frame run`` itself before its first thread starts, so it holds whether the
daemon runs under systemd, by hand or in a test. A fixed threshold returns every block of 128 KiB or
more to the system when it is freed. Elsewhere than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import logging

log = logging.getLogger(__name__)

UPKEEP_SECONDS = 300.0  # how often the daemon's main loop collects and trims (``upkeep``)
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameters (malloc.h)
M_ARENA_MAX = -8
ARENA_MAX = 2
MMAP_THRESHOLD = 128 * 1024


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
    stay partly used and resident. In the soak this was the daemon's slow growth (issue 27)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


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
