"""Process memory behaviour that matters when peak RSS is the budget (glibc malloc tuning).

glibc serves large blocks with mmap and returns them to the OS on free, but its *dynamic* mmap
threshold rises to the size of each freed block (up to 32 MB): after the first big activation is
freed, later ones of that size come from the heap, where freed space is kept and fragments. On the
SD 1.5 UNet that retention is ~45 MB of peak RSS. Fixing the threshold at 1 MB turns the dynamic
behaviour off, so every activation or weight buffer goes back to the OS the moment it dies.

Smaller blocks (< 1 MB: kernel temporaries, weight reads of the prefetch thread, protobuf parsing)
still come from malloc's arenas, one per thread that allocates, and freed space inside an arena stays
resident. Over a UNet run the worker threads' arenas hold 10-12 MB that no one uses; the next
component of a render (the VAE) would start on top of it. ``trim_free_memory`` (``malloc_trim``) hands
those pages back; the engine calls it when a model is closed, i.e. between the pipeline's phases.

Fixing the mmap threshold also freezes glibc's trim threshold at its 128 KB default (the dynamic rule
keeps it at twice the mmap threshold). A block kernel's temporaries (GELU's erf makes five arrays of
one 512 KB block, a norm or softmax block two or three) then sit at the top of the heap, are handed
back to the OS when the block ends and fault in afresh for the next one: a 4096 × 1280 GELU took
24 k page faults and 49 ms of CPU where 63 faults and 12 ms do the same work. ``TRIM_THRESHOLD_BYTES``
lets a thread's heap keep one block's temporaries between blocks (at most that much free memory per
malloc arena, which is the whole cost in peak).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
M = TypeVar("M")
R = TypeVar("R")

M_MMAP_THRESHOLD = -3  # glibc mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
MMAP_THRESHOLD_BYTES = 1 << 20
TRIM_THRESHOLD_BYTES = 4 << 20  # a block kernel's temporaries on one thread (GELU: 5 x 512 KB), with room

_applied = False
_libc = None


def _glibc():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            _libc = False
    return _libc or None


def return_freed_buffers_to_os() -> bool:
    """Fix glibc's mmap and trim thresholds (once per process); False where that is not glibc/Linux."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = _glibc()
        ok = (libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
              and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)))
    except AttributeError:  # musl and other libcs have no mallopt
        ok = False
    log.debug("mallopt(M_MMAP_THRESHOLD, %d; M_TRIM_THRESHOLD, %d): %s", MMAP_THRESHOLD_BYTES,
              TRIM_THRESHOLD_BYTES, ok)
    _applied = ok
    return ok


def trim_free_memory() -> bool:
    """Return free pages inside malloc's arenas to the OS (glibc ``malloc_trim(0)``, ~1 ms); False
    where there is no glibc."""
    libc = _glibc() if sys.platform.startswith("linux") else None
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    libc.malloc_trim(0)
    return True


def release_model(model: Any) -> None:
    """Close ``model`` (its weight files, its prefetch thread), then collect and trim, so the next phase
    of a render starts on the memory this one freed.

    The model's structure is freed before the trim only if this call holds the last reference to it
    (``with_model`` passes it so); a caller that keeps its own reference frees the structure later.
    """
    close = getattr(model, "close", None)
    if close is not None:
        close()
    del model
    gc.collect()
    trim_free_memory()  # the model's structure is garbage only now


def with_model(load: Callable[[str], M], source: str, work: Callable[[M], R]) -> R:
    """``work(load(source))``, the model then closed and its memory handed back (``release_model``)
    whether or not ``work`` raised. The one way the text encoders and the VAE are run."""
    holder = [load(source)]
    try:
        return work(holder[0])
    finally:
        release_model(holder.pop())  # the last reference goes with the call
