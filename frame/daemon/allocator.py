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
import logging

log = logging.getLogger(__name__)

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
