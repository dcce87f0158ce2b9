"""Reused big buffers for kernel outputs and temporaries: fewer fresh pages per evaluation.

Every numpy array over glibc's 1 MB mmap threshold (``memory.py``) is a fresh mapping: the kernel
zero-fills each page on first touch and unmaps it when the array dies. A UNet evaluation allocates
gigabytes that way (400 k page faults for SD 1.5 at 512²), about 0.75 CPU-s of system time that
onnxruntime, which keeps its activations in an arena, does not pay. The hot kernels therefore take
their outputs and scratch from ``empty()``: a pool of raw buffers, handed out as views, and free again
as soon as no view of them is alive (the buffer's reference count says so; no release call to forget).

Peak memory is the budget, so free buffers are not hoarded: the run loop calls ``trim()`` after every
step, which keeps at most ``IDLE_BYTES`` of free buffers (the most recently used ones: the next
steps of a UNet ask for the same sizes), and only while the process, with any new buffer it is about
to write, stays ``MARGIN_BYTES`` below its own high-water mark: kept buffers fill room the run has
already used instead of making a new peak. ``forget()`` at the end of a run empties the pool, so
nothing is retained between runs or models. Only exact sizes are reused (a UNet repeats a handful
of shapes), so a view always spans its whole buffer. Measured with IDLE_BYTES = 32 MB on the SD 1.5
UNet (2 cores, load 11-16, benchmarks/engine_vs_onnxruntime.py medians of 6 runs): system time
1.78 → 1.28 s per evaluation, peak 238 → 243 MB, but the fp16 SDXL UNet at 1024² rose to 304.1 MB,
so the default is 0 (see IDLE_BYTES). See
docs/benchmarks-engine.md.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
from collections.abc import Callable

import numpy as np

MIN_POOLED_BYTES = 1 << 20  # smaller arrays come from malloc's arenas, which already reuse them
# Free buffers kept between steps. 0 by default: with 32 MB the SD 1.5 UNet's system time fell
# 1.78 -> 1.28 s (benchmark medians) at +5 MB, but the fp16 SDXL UNet at 1024² peaked at 304.1 MB
# (target 300, 292.6 before): non-pool allocations (fp16 weights widened to float32) met the kept
# buffers. With 0, buffers are still reused within a step (GEGLU blocks, conv and attention scratch).
IDLE_BYTES = 0
MARGIN_BYTES = 32 << 20  # ... and only while the process is this far below its peak


def _refcounts(buffers: dict[int, np.ndarray]) -> dict[int, int]:
    """Each buffer's reference count, seen from here (every check goes through this one function)."""
    return {key: sys.getrefcount(raw) for key, raw in buffers.items()}


def _free_count() -> int | None:
    """The count ``_refcounts`` shows for a buffer only the pool holds (the pool's dict, the loop
    variable, getrefcount's argument on CPython 3.11), calibrated once; None (pooling off) if a live
    view would not show as one more."""
    probe = {0: np.empty(1, np.uint8)}
    free = _refcounts(probe)[0]
    view = probe[0][:]
    busy = _refcounts(probe)[0]
    del view
    return free if busy == free + 1 else None


_FREE_REFS = _free_count()


class BufferPool:
    """Raw byte buffers keyed by identity; a buffer is free when only the pool references it."""

    def __init__(self, idle_bytes: int = IDLE_BYTES,
                 memory: Callable[[], tuple[int | None, int]] | None = None) -> None:
        """``memory``: returns (resident bytes, peak resident bytes) of the process (default: /proc)."""
        self.idle_bytes = idle_bytes
        self._memory = memory or _rss_and_peak
        self._buffers: dict[int, np.ndarray] = {}
        self._last_use: dict[int, int] = {}
        self._clock = 0
        self._lock = threading.Lock()

    def empty(self, shape, dtype=np.float32) -> np.ndarray:
        """An uninitialised C-contiguous array, like ``np.empty(shape, dtype)``."""
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < MIN_POOLED_BYTES or _FREE_REFS is None:
            return np.empty(shape, dtype)
        with self._lock:
            self._clock += 1
            for key, count in _refcounts(self._buffers).items():
                raw = self._buffers[key]
                if count == _FREE_REFS and raw.nbytes == nbytes:
                    self._last_use[key] = self._clock
                    return raw.view(dtype).reshape(shape)
            self._trim(self._allowance(nbytes))  # a new buffer: first give back what is over the allowance
            raw = np.empty(nbytes, np.uint8)
            self._buffers[id(raw)] = raw
            self._last_use[id(raw)] = self._clock
            return raw.view(dtype).reshape(shape)

    def owns(self, base: object) -> bool:
        """True if ``base`` (an array's ``.base``) is one of the pool's buffers."""
        return self._buffers.get(id(base)) is base

    def trim(self) -> None:
        """Keep at most ``idle_bytes`` of free buffers, the most recently used."""
        with self._lock:
            self._trim(self._allowance())

    def _allowance(self, coming: int = 0) -> int:
        """Free bytes that may stay: ``idle_bytes``, and only while the process, with ``coming`` more
        bytes (a new buffer about to be written), stays ``MARGIN_BYTES`` below its own high-water mark,
        so kept buffers do not make a new peak."""
        if self.idle_bytes <= 0:
            return 0
        rss, peak = self._memory()
        if rss is None:
            return 0
        free = sum(self._buffers[key].nbytes for key in self._free_keys())
        return max(0, min(self.idle_bytes, peak - MARGIN_BYTES - coming - (rss - free)))

    def forget(self) -> None:
        """Drop every buffer: free ones go back to the OS, buffers still in use now belong to their
        views alone (a run's outputs outlive the run)."""
        with self._lock:
            self._buffers.clear()
            self._last_use.clear()

    def held_bytes(self) -> tuple[int, int]:
        """(bytes in use, bytes free) of the pool's buffers, for tests and diagnostics."""
        with self._lock:
            free = sum(self._buffers[key].nbytes for key in self._free_keys())
            return sum(raw.nbytes for raw in self._buffers.values()) - free, free

    def _free_keys(self) -> list[int]:
        return [key for key, count in _refcounts(self._buffers).items() if count == _FREE_REFS]

    def _trim(self, keep: int) -> None:
        free = self._free_keys()
        free.sort(key=self._last_use.__getitem__, reverse=True)
        kept = 0
        for key in free:
            kept += self._buffers[key].nbytes
            if kept > keep:
                del self._buffers[key], self._last_use[key]


def _rss_and_peak() -> tuple[int | None, int]:
    """(resident bytes now, peak resident bytes so far) of this process; (None, 0) off Linux."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            rss = int(statm.read().split()[1]) * _PAGE
    except (ImportError, OSError, ValueError, IndexError):
        return None, 0
    return rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_shared = BufferPool()


def shared() -> BufferPool:
    """The process's pool (kernels and the run loop share it)."""
    return _shared


def empty(shape, dtype=np.float32) -> np.ndarray:
    """``np.empty`` from the shared pool (see the module docstring)."""
    return _shared.empty(shape, dtype)
