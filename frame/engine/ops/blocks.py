"""The engine's core pool: row blocks for memory-bound kernels and split GEMMs for the big products.

Softmax over an (8, 4096, 4096) score tensor or erf over a GEGLU activation makes five to fifteen
passes over hundreds of megabytes. Done whole, every pass streams from RAM and numpy uses one core.
Done in blocks of rows that fit in L2 cache, only the first pass touches RAM; and since numpy
releases the GIL inside its loops, blocks run on a small thread pool, one thread per core (the
Pi Zero 2 has four). Kernels pass a function that fills ``out[rows]`` from ``x[rows]``.

GEMMs go through ``matmul_into``: inside a step whose kernel splits its own work (see
``blas_threads``) BLAS runs on one thread and a big product is cut into one piece per core, run
here; elsewhere it is one ``np.matmul`` that BLAS threads as it likes. The pool's idle threads sleep
on a queue, where OpenBLAS's own workers would spin.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from frame.engine import blas_threads

BLOCK_BYTES = 256 << 10  # per block: comfortably inside a Cortex-A53's 512 KB L2
MIN_PARALLEL_BYTES = 4 << 20  # below this, thread hand-off costs more than it saves
# Products under this many multiply-adds (~1-2 ms on one core) are not split: a hand-off to the pool
# costs tens of microseconds, and each piece re-packs the shared operand.
MIN_SPLIT_WORK = 1 << 22

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_local = threading.local()


def _mark_worker() -> None:
    _local.in_pool = True


def _executor() -> ThreadPoolExecutor:
    """The shared pool, recreated in a forked child (whose copy has no live worker threads and
    would otherwise queue jobs forever)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="frame-ops",
                                   initializer=_mark_worker)
        _pool_pid = os.getpid()
    return _pool


def workers() -> int:
    """Threads the memory-bound kernels may use (BLAS's thread count; 1 inside a pool thread)."""
    return 1 if getattr(_local, "in_pool", False) else blas_threads.shared().compute_threads()


def run_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent ``tasks``: all but the last on the pool, the last in the caller (which would
    otherwise only wait). Inside a pool thread they run one after another (no nested hand-off, which
    could wait on itself); the caller's own task counts as one too, so a kernel it calls does not
    split again and queue pieces behind the other shares."""
    if len(tasks) < 2 or getattr(_local, "in_pool", False):
        for task in tasks:
            task()
        return
    jobs = [_executor().submit(task) for task in tasks[:-1]]
    _local.in_pool = True
    try:
        tasks[-1]()
    finally:
        _local.in_pool = False
        for job in jobs:
            job.result()


def gemm_pieces(work: int) -> int:
    """How many pieces a product of ``work`` multiply-adds is split into (1 = not split)."""
    if work < MIN_SPLIT_WORK or getattr(_local, "in_pool", False):
        return 1
    return blas_threads.shared().split_count()


def _bounds(size: int, pieces: int) -> list[tuple[int, int]]:
    step = -(-size // pieces)
    return [(start, min(start + step, size)) for start in range(0, size, step)]


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b, out=out)``, split into one piece per core when the product is big.

    2-D: the longer of out's two sides is cut (so each piece re-packs the smaller operand). Stacked
    (batched) products are cut along the stack when it has a piece for every core, else each matrix
    is cut. ``out`` must not overlap the operands.
    """
    m, n = out.shape[-2:]
    k = a.shape[-1]
    pieces = gemm_pieces(out.size * k)
    if pieces == 1 or max(m, n) < 2 * pieces:
        return np.matmul(a, b, out=out)
    if out.ndim == 3 and out.shape[0] >= pieces:
        a3 = np.broadcast_to(a, out.shape[:1] + a.shape[-2:])
        b3 = np.broadcast_to(b, out.shape[:1] + b.shape[-2:])
        tasks = [lambda s=s, e=e: np.matmul(a3[s:e], b3[s:e], out=out[s:e]) for s, e in _bounds(out.shape[0], pieces)]
    elif m >= n:
        tasks = [lambda s=s, e=e: np.matmul(a[..., s:e, :], b, out=out[..., s:e, :]) for s, e in _bounds(m, pieces)]
    else:
        tasks = [lambda s=s, e=e: np.matmul(a, b[..., s:e], out=out[..., s:e]) for s, e in _bounds(n, pieces)]
    run_tasks(tasks)
    return out


def _run_blocks(fn, x: np.ndarray, out: np.ndarray, per_block: int) -> None:
    with np.errstate(all="ignore"):  # per thread; the kernel's caller already silenced its own
        for start in range(0, x.shape[0], per_block):
            fn(x[start:start + per_block], out[start:start + per_block])


def map_row_blocks(fn: Callable[[np.ndarray, np.ndarray], None], x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Call ``fn(x_block, out_block)`` over blocks of rows of 2-D ``x`` / ``out``; returns ``out``.

    ``out`` may be ``x`` itself (in place). Blocks are independent, so the order does not matter.
    Each thread gets one contiguous share of whole blocks and walks it block by block: the blocks
    are the same rows whatever the thread count, so a ``fn`` whose per-row result depends on the
    block's other rows (einsum over long rows does) still gives the one-thread answer bit for bit.
    """
    rows, length = x.shape
    per_block = max(1, BLOCK_BYTES // max(1, length * x.itemsize))
    count = min(workers(), -(-rows // per_block))
    if x.nbytes < MIN_PARALLEL_BYTES or count < 2:
        _run_blocks(fn, x, out, per_block)
        return out
    shares = [(s * per_block, min(e * per_block, rows)) for s, e in _bounds(-(-rows // per_block), count)]
    run_tasks([lambda s=s, e=e: _run_blocks(fn, x[s:e], out[s:e], per_block) for s, e in shares])
    return out


def split_rows(fn: Callable[[int, int], None], rows: int, nbytes: int) -> None:
    """Call ``fn(start, stop)`` over one contiguous share of ``range(rows)`` per core (one call below
    ``MIN_PARALLEL_BYTES`` of work, ``nbytes``, or inside a pool thread): for single passes whose rows
    are independent but which need the row numbers (a per-channel bias, a per-channel affine), where
    ``map_row_blocks``' (x, out) blocks do not say which rows they hold."""
    count = min(workers(), rows)
    if nbytes < MIN_PARALLEL_BYTES or count < 2:
        if rows:
            fn(0, rows)
        return
    run_tasks([lambda s=s, e=e: fn(s, e) for s, e in _bounds(rows, count)])
