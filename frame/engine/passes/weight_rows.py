"""A stored weight its op reads itself, one block of output channels at a time, the next block read
while the current one computes.

An 8-bit or fp16 weight of 4 MB and more (``weight_decoding.STREAM_ROWS_MIN_BYTES``) is not fetched
whole before its DecodedWeight step: the op reads the stored rows of one block, decodes them and runs
its kernel on them. Read one after the other, the reads stall the op: on a Pi Zero 2 W's SD card
(23 MB/s) SDXL's 2560 → 1280 conv reads 29 MB of uint8 rows, 1.3 s in which its cores wait.
So while block *i* computes, block *i + 1*'s rows are read on a reader thread (``ROW_READER``): the
card and the cores work at the same time, and the op takes about the larger of the two, not their sum.
The cost is one block's stored bytes more while the op runs (counted by ``weight_decoding``'s scratch,
``stored_block``).

The provider's row reads (``get_rows``) are the ones the op made before; they were already made
beside the provider's own read-ahead thread, so a second thread reading is nothing new to them.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from frame.engine.io.weights import WeightRef

_reader: ThreadPoolExecutor | None = None
_reader_lock = threading.Lock()


def row_reader() -> ThreadPoolExecutor:
    """The process's one thread that reads next blocks (made on first use: a worker that never
    streams rows never starts it)."""
    global _reader
    with _reader_lock:
        if _reader is None:
            _reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="frame-rows")
        return _reader


class WeightRows:
    """A stored weight handed to a DecodedWeight op unread: the op reads one block of leading-axis rows
    (output channels) at a time, so only that block's stored bytes are in memory (not the whole
    59 MB fp16 weight of SDXL's 2560 -> 1280 conv next to its decoded block), and the next block's
    while this one computes (``read_ahead``). See ``weight_decoding.stream_weight_rows``."""

    def __init__(self, ref: WeightRef, provider) -> None:
        self.ref, self.provider = ref, provider
        self.shape, self.dtype = tuple(ref.shape), ref.dtype
        self.ndim, self.size = len(self.shape), int(np.prod(self.shape))
        self._ahead: tuple[int, int, Future] | None = None

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop``: the block ``read_ahead`` started, when it is this one."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if ahead[:2] == (start, stop):
                return ahead[2].result()
            _settle(ahead[2])
        return self._read_now(start, stop)

    def read_ahead(self, start: int, stop: int) -> None:
        """Start reading rows ``start:stop`` on the reader thread; ``read`` of that block takes them."""
        self.drop_ahead()
        self._ahead = (start, stop, row_reader().submit(self._read_now, start, stop))

    def drop_ahead(self) -> None:
        """Wait for a block read ahead and not taken (the op failed, or stopped early), and drop it:
        no read is left running once the op has returned."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            _settle(ahead[2])

    def _read_now(self, start: int, stop: int) -> np.ndarray:
        get_rows = getattr(self.provider, "get_rows", None)
        if get_rows is not None:
            return get_rows(self.ref, np.arange(start, stop))
        whole = self.provider.get(self.ref)  # a provider without row reads: whole, then sliced
        try:
            return np.array(whole[start:stop])
        finally:
            self.provider.release(self.ref)


def _settle(future: Future) -> None:
    """Wait for ``future`` and drop its result or error: a block nobody will read."""
    try:
        future.result()
    except Exception:  # noqa: BLE001 - the read that matters raises again when the op asks for it
        pass
