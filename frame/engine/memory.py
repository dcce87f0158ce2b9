"""Process memory behaviour that matters when peak RSS is the budget (glibc malloc tuning).

glibc serves large blocks with mmap and returns them to the OS on free, but its *dynamic* mmap
threshold rises to the size of each freed block (up to 32 MB): after the first big activation is
freed, later ones of that size come from the heap, where freed space is kept and fragments. On the
SD 1.5 UNet that retention is ~45 MB of peak RSS. Fixing the threshold at 1 MB turns the dynamic
behaviour off, so every activation or weight buffer goes back to the OS the moment it dies.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
MMAP_THRESHOLD_BYTES = 1 << 20

_applied = False


def return_freed_buffers_to_os() -> bool:
    """Fix glibc's mmap threshold (once per process); False where that is not glibc/Linux."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        ok = False
    log.debug("mallopt(M_MMAP_THRESHOLD, %d): %s", MMAP_THRESHOLD_BYTES, ok)
    _applied = ok
    return ok
