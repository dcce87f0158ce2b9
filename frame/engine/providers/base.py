"""The weights-provider interface: three methods between the engine and wherever weights live.

The engine calls ``prepare(refs)`` once at load with every streamed weight in the order it will ask
for them on each run (``ref.index`` is that position), then per run ``get(ref)`` just before the first
node that needs a weight and ``release(ref)`` right after its last use. A provider may read ahead
(prefetch), keep everything (RAM), or transform bytes (a future dequantising uint8 provider returns
float32 from ``get``). ``close()`` is optional.

Any object with these methods can be passed as ``load_model(..., weights=provider)``; subclassing
``ReadingProvider`` gives it ``read(ref)``, which fetches and checks one tensor's bytes, and the
weight cache for URLs when the current ``HttpSettings`` turn it on (``frame.engine.io.weight_cache``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from frame.engine.errors import SourceTruncated, WeightDataError
from frame.engine.io import cached_model
from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.sources import SourcePool, is_url
from frame.engine.io.weight_cache import WeightCache
from frame.engine.io.weights import WeightRef


@runtime_checkable
class WeightsProvider(Protocol):
    def prepare(self, refs: Sequence[WeightRef]) -> None: ...

    def get(self, ref: WeightRef) -> np.ndarray: ...

    def release(self, ref: WeightRef) -> None: ...


class ReadingProvider:
    """Base for providers that read byte ranges from local files or URLs (see ``SourcePool``)."""

    def __init__(self, http_options: dict | None = None, http: HttpSettings | None = None) -> None:
        self.sources = SourcePool(http, http_options)
        self.refs: list[WeightRef] = []
        settings = self.sources.http_settings
        self.cache = (WeightCache(settings.cache_dir, settings.cache_max_bytes, self.sources.stats)
                      if settings.cache_enabled else None)

    def prepare(self, refs: Sequence[WeightRef]) -> None:
        self.refs = list(refs)

    def read(self, ref: WeightRef) -> np.ndarray:
        """The tensor's array, freshly read; WeightDataError naming the tensor if the data is short."""
        if ref.location is None:
            raise WeightDataError(f"weight {ref.name!r} has no stored location")
        if self.cache is not None and is_url(ref.location):
            return self._read_cached([ref])[0]
        try:
            buf = self._fetch(ref.location, ref.offset, ref.length, ref.dtype.alignment)
        except SourceTruncated as exc:
            raise WeightDataError(f"weight {ref.name!r}: {exc}") from exc
        return ref.decode(buf)

    def _fetch(self, location: str, offset: int, length: int, alignment: int = 1) -> np.ndarray:
        """A byte range, mapped where the source can (local files) and the mapping keeps the data
        aligned to ``alignment`` bytes, else read into a fresh (aligned) buffer: a misaligned view
        would be copied by ``WeightRef.decode``, holding the weight twice."""
        source = self.sources.get(location)
        map_at = getattr(source, "map_at", None)
        if map_at is not None and offset % alignment == 0:
            return map_at(offset, length)
        return source.read_at(offset, length)

    def read_group(self, refs: Sequence[WeightRef]) -> list[np.ndarray]:
        """Several weights stored back to back in one file (small gaps are read along), one read."""
        if len(refs) == 1:
            return [self.read(refs[0])]
        if self.cache is not None and is_url(refs[0].location):
            return self._read_cached(refs)
        first, last = refs[0], refs[-1]
        total = last.offset + last.length - first.offset
        try:
            buf = self._fetch(first.location, first.offset, total)
        except SourceTruncated as exc:
            raise WeightDataError(f"weights {first.name!r}..{last.name!r}: {exc}") from exc
        return [ref.decode(buf[ref.offset - first.offset:ref.offset - first.offset + ref.length]) for ref in refs]

    def _read_cached(self, refs: Sequence[WeightRef]) -> list[np.ndarray]:
        """Back-to-back weights of one URL: those in the weight cache from disk, each run of the others
        with one request (then stored in the cache)."""
        source = self.sources.get(refs[0].location)
        url, validator = source.url, cached_model.validator(self.cache, source)  # one small request
        buffers = [self.cache.load(url, validator, r.offset, r.length) for r in refs]
        i = 0
        while i < len(refs):
            if buffers[i] is not None:
                i += 1
                continue
            j = i
            while j + 1 < len(refs) and buffers[j + 1] is None:
                j += 1
            start = refs[i].offset
            try:
                run = source.read_at(start, refs[j].offset + refs[j].length - start)
            except SourceTruncated as exc:
                raise WeightDataError(f"weights {refs[i].name!r}..{refs[j].name!r}: {exc}") from exc
            for k in range(i, j + 1):
                part = run[refs[k].offset - start:refs[k].offset - start + refs[k].length]
                self.cache.store(url, validator, refs[k].offset, refs[k].length, part)
                buffers[k] = part
            i = j + 1
        return [ref.decode(buf) for ref, buf in zip(refs, buffers)]

    def get_rows(self, ref: WeightRef, rows: np.ndarray) -> np.ndarray:
        """Only ``rows`` (sorted, unique) of a weight's first axis, read as contiguous runs.

        Optional extension used for Gather on a weight (token embeddings): 77 rows instead of the
        whole 152 MB table. Providers without it get ``get`` + indexing.
        """
        row_bytes = ref.length // ref.shape[0] if ref.shape[0] else 0
        source = self.sources.get(ref.location)
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        runs = [(int(run[0]), len(run)) for run in np.split(rows, breaks)] if rows.size else []
        spans = [(ref.offset + first * row_bytes, count * row_bytes) for first, count in runs]
        bufs = self._cached_rows(ref, source, spans) if self.cache is not None and is_url(ref.location) else None
        parts = []
        for i, (first, count) in enumerate(runs):
            try:
                buf = bufs[i] if bufs is not None else source.read_at(*spans[i])
            except SourceTruncated as exc:
                raise WeightDataError(f"weight {ref.name!r}: {exc}") from exc
            if buf.size != count * row_bytes:
                raise WeightDataError(f"weight {ref.name!r}: short read of rows {first}..{first + count}")
            parts.append(buf.view(ref.dtype).reshape((count, *ref.shape[1:])))
        if not parts:
            return np.empty((0, *ref.shape[1:]), ref.dtype)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _cached_rows(self, ref: WeightRef, source, spans: list[tuple[int, int]]) -> list[np.ndarray] | None:
        """The spans of a token table from the weight cache, the whole table stored there first (a
        chunk at a time) when it is not yet; None when the cache cannot hold it (read from the server)."""
        url, validator = source.url, cached_model.validator(self.cache, source)
        parts = self.cache.read_parts(url, validator, ref.offset, ref.length, spans)
        if parts is None and self.cache.store_chunks(url, validator, ref.offset, ref.length, source.read_at):
            parts = self.cache.read_parts(url, validator, ref.offset, ref.length, spans)
        return parts

    def release(self, ref: WeightRef) -> None:
        """Nothing to do: the engine dropping its reference frees the array."""

    def close(self) -> None:
        self.sources.close()
