"""Reading providers over any byte source (file or URL): read each weight on request, or read ahead.

``Prefetch`` follows the engine's fixed fetch order: a thread reads the next weights while the
current op computes, as long as the weight bytes in memory (read ahead, plus handed to the engine and
not yet released) stay within ``budget_bytes``. Counting the held weights too matters for peak memory:
the biggest ops hold the biggest weights, and reading 32 MB ahead on top of a held 30 MB conv weight
put 30 MB on the SD 1.5 UNet's peak; now the read-ahead shrinks while a big weight is in use and
grows back during the small ops between. The default budget is 16 MB (it was 32): a uint8 SDXL
UNet's largest weights (11-15 MB) are still read ahead during the small ops before them, and the
budget sits on top of every conv peak (SDXL UNet at 1024², uint8: 301.8 MB with 32 MB).
A weight larger than that is read when the engine asks for it — unless ``big_weights_ahead`` is
set: then it is also read ahead while the weights the engine holds plus those read ahead stay
within the largest single weight, so the 112 MB UNet conv weights load during the small ops before
them (seconds of SD-card I/O hidden per step) but never while another big weight is in use. That
costs peak memory (SD 1.5 UNet: 244 → 287 MB, as big weights now coexist with activations), hence
off by default.
Runs of small weights that lie back to back in one file — or nearly: weights embedded in the
``.onnx`` file are separated by a few bytes of protobuf framing, skipped gaps of up to ``GAP_BYTES``
are read along — are fetched with one read of up to ``COALESCE_BYTES`` (one HTTP request instead of
dozens for a UNet's biases and norm scales, or hundreds for a model with embedded weights). Both
also work on http(s) locations through the shared ``SourcePool``, which is how ``HttpPrefetch`` is built.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.weights import WeightRef
from frame.engine.providers.base import ReadingProvider
from frame.engine.providers.registry import register_provider

log = logging.getLogger(__name__)

COALESCE_BYTES = 1 << 20
GAP_BYTES = 4096


@register_provider("nocache")
class NoCache(ReadingProvider):
    """Synchronous read on every request: the smallest memory, no overlap of I/O and compute."""

    def get(self, ref: WeightRef) -> np.ndarray:
        return self.read(ref)


@register_provider("prefetch", url_variant="http")
class Prefetch(ReadingProvider):
    """Reads ahead in fetch order on a daemon thread, within ``budget_bytes`` of unconsumed data."""

    def __init__(self, budget_bytes: int = 16 << 20, http_options: dict | None = None,
                 big_weights_ahead: bool = False, http: HttpSettings | None = None) -> None:
        super().__init__(http_options, http)
        self.budget_bytes = budget_bytes
        self.big_weights_ahead = big_weights_ahead
        self._ceiling = budget_bytes
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._reset(0)

    def _reset(self, start: int) -> None:
        """Forget read-ahead state and continue reading from ``start`` (caller holds the lock)."""
        self._next = start
        self._ready: dict[int, np.ndarray] = {}
        self._ready_bytes = 0
        self._errors: dict[int, BaseException] = {}
        self._inflight = range(0)
        self._waiting: int | None = None
        self._held: dict[int, int] = {}  # handed to the engine, not yet released: index → bytes
        self._held_bytes = 0
        self._generation = getattr(self, "_generation", 0) + 1

    def prepare(self, refs: Sequence[WeightRef]) -> None:
        with self._cond:
            super().prepare(refs)
            self._set_ceiling()
            self._reset(len(self.refs))  # idle until the first request
            self._cond.notify_all()

    def set_budget(self, budget_bytes: int) -> None:
        """Read ahead within ``budget_bytes`` from now on (``frame.diffusion.readahead``: a component
        loaded with the default gets the budget tonight's memory plan left room for)."""
        if budget_bytes < 0:
            raise ValueError(f"read-ahead budget must be at least 0 bytes, got {budget_bytes}")
        with self._cond:
            self.budget_bytes = int(budget_bytes)
            self._set_ceiling()
            self._cond.notify_all()

    def _set_ceiling(self) -> None:
        """Bytes read ahead plus held may reach (caller holds the lock): the budget, or with
        ``big_weights_ahead`` the largest weight if that is more."""
        largest = max([self.budget_bytes, *(r.nbytes for r in self.refs)])
        self._ceiling = largest if self.big_weights_ahead else self.budget_bytes

    def get(self, ref: WeightRef) -> np.ndarray:
        i = ref.index
        if not 0 <= i < len(self.refs) or self.refs[i] is not ref:
            return self.read(ref)  # not part of the prepared order: plain read
        with self._cond:
            self._start_thread()
            self._drop_before(i)
            if i not in self._ready and i not in self._errors and i not in self._inflight and i != self._next:
                log.debug("prefetch restarts at weight %d (%s)", i, ref.name)
                self._reset(i)
            self._waiting = i
            self._cond.notify_all()
            while i not in self._ready and i not in self._errors:
                self._cond.wait()
            self._waiting = None
            if i in self._errors:
                error = self._errors.pop(i)
                raise error
            array = self._ready.pop(i)
            self._ready_bytes -= array.nbytes
            self._held[i] = array.nbytes
            self._held_bytes += array.nbytes
            self._cond.notify_all()
            return array

    def release(self, ref: WeightRef) -> None:
        with self._cond:
            self._held_bytes -= self._held.pop(ref.index, 0)
            self._cond.notify_all()

    def _drop_before(self, i: int) -> None:
        for k in [k for k in self._ready if k < i]:
            self._ready_bytes -= self._ready.pop(k).nbytes

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="frame-weights-prefetch", daemon=True)
            self._thread.start()

    def _can_read(self) -> bool:
        if self._next >= len(self.refs):
            return False
        size = self.refs[self._next].nbytes
        return self._waiting == self._next or self._ready_bytes + self._held_bytes + size <= self._ceiling

    def _group_size(self, k: int) -> int:
        """How many weights from ``k`` on to read at once: contiguous bytes in one file, small."""
        first = self.refs[k]
        total, end = first.nbytes, k + 1
        while end < len(self.refs):
            ref, prev = self.refs[end], self.refs[end - 1]
            gap = ref.offset - (prev.offset + prev.length)
            if (ref.location != first.location or not 0 <= gap <= GAP_BYTES
                    or total + gap + ref.nbytes > COALESCE_BYTES
                    or self._ready_bytes + total + ref.nbytes > self.budget_bytes):
                break
            total += gap + ref.nbytes
            end += 1
        return end - k

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._can_read():
                    self._cond.wait()
                if self._closed:
                    return
                k, generation = self._next, self._generation
                group = range(k, k + self._group_size(k))
                self._next = group.stop
                self._inflight = group
            try:
                arrays, error = self.read_group(self.refs[group.start:group.stop]), None
            except BaseException as exc:  # handed to the consumer, who raises it
                arrays, error = [], exc
            with self._cond:
                if generation == self._generation:
                    self._inflight = range(0)
                    if error is not None:
                        self._errors.update({i: error for i in group})
                        self._next = len(self.refs)  # stop reading ahead until the next restart
                    else:
                        self._ready.update(zip(group, arrays))
                        self._ready_bytes += sum(a.nbytes for a in arrays)
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        super().close()
