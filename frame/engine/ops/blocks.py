"""Row blocks for memory-bound kernels: cache-sized pieces, spread over the CPU cores.

Softmax over an (8, 4096, 4096) score tensor or erf over a GEGLU activation makes five to fifteen
passes over hundreds of megabytes. Done whole, every pass streams from RAM and numpy uses one core.
Done in blocks of rows that fit in L2 cache, only the first pass touches RAM; and since numpy
releases the GIL inside its loops, blocks run on a small thread pool, one thread per core (the
Pi Zero 2 has four). Kernels pass a function that fills ``out[rows]`` from ``x[rows]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK_BYTES = 256 << 10  # per block: comfortably inside a Cortex-A53's 512 KB L2
MIN_PARALLEL_BYTES = 4 << 20  # below this, thread hand-off costs more than it saves

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0


def _executor() -> ThreadPoolExecutor:
    """The shared pool, recreated in a forked child (whose copy has no live worker threads and
    would otherwise queue jobs forever)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="frame-ops")
        _pool_pid = os.getpid()
    return _pool


def _run_blocks(fn, x: np.ndarray, out: np.ndarray, per_block: int) -> None:
    with np.errstate(all="ignore"):  # per thread; the kernel's caller already silenced its own
        for start in range(0, x.shape[0], per_block):
            fn(x[start:start + per_block], out[start:start + per_block])


def map_row_blocks(fn: Callable[[np.ndarray, np.ndarray], None], x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Call ``fn(x_block, out_block)`` over blocks of rows of 2-D ``x`` / ``out``; returns ``out``.

    ``out`` may be ``x`` itself (in place). Blocks are independent, so the order does not matter.
    Each worker thread gets one contiguous share of the rows and walks it block by block.
    """
    rows, length = x.shape
    per_block = max(1, BLOCK_BYTES // max(1, length * x.itemsize))
    workers = min(os.cpu_count() or 1, -(-rows // per_block))
    if x.nbytes < MIN_PARALLEL_BYTES or workers < 2:
        _run_blocks(fn, x, out, per_block)
        return out
    share = -(-rows // workers)
    jobs = [_executor().submit(_run_blocks, fn, x[s:s + share], out[s:s + share], per_block)
            for s in range(0, rows, share)]
    for job in jobs:
        job.result()
    return out
