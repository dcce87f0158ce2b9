"""Bytes fetched per kind of source (local disk, HTTP, the local weight cache), and the time spent.

A night's length on a Pi is set by how many weight bytes cross the SD card or the Wi-Fi link per
denoising step, so the engine counts them where they are read: every ``ByteSource`` of a
``SourcePool`` adds to the pool's ``FetchStats``. Callers take a ``snapshot()`` before and after a run
(or a step) and subtract: ``after - before`` is what that stretch fetched. ``seconds`` is the time
spent inside successful reads of that kind (retry waits excluded), so ``bytes / seconds`` is the rate
the link actually delivered — the prefetch thread overlaps it with compute, so it is not wall time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

KINDS = ("disk", "http", "cache")


@dataclass(frozen=True)
class FetchSnapshot:
    """Totals at one moment: ``bytes`` and busy ``seconds`` per kind (every kind of ``KINDS`` present)."""

    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    def rate(self, kind: str) -> float | None:
        """Bytes per second delivered by ``kind`` sources, or None when nothing was read from them."""
        seconds = self.seconds.get(kind, 0.0)
        return self.bytes.get(kind, 0) / seconds if self.bytes.get(kind) and seconds > 0 else None

    def __sub__(self, other: FetchSnapshot) -> FetchSnapshot:
        return FetchSnapshot({k: self.bytes[k] - other.bytes[k] for k in KINDS},
                             {k: self.seconds[k] - other.seconds[k] for k in KINDS})

    def __add__(self, other: FetchSnapshot) -> FetchSnapshot:
        return FetchSnapshot({k: self.bytes[k] + other.bytes[k] for k in KINDS},
                             {k: self.seconds[k] + other.seconds[k] for k in KINDS})


class FetchStats:
    """Thread-safe counters (the prefetch thread and the caller both read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes = dict.fromkeys(KINDS, 0)
        self._seconds = dict.fromkeys(KINDS, 0.0)

    def add(self, kind: str, nbytes: int, seconds: float = 0.0) -> None:
        with self._lock:
            self._bytes[kind] += int(nbytes)
            self._seconds[kind] += float(seconds)

    def snapshot(self) -> FetchSnapshot:
        with self._lock:
            return FetchSnapshot(dict(self._bytes), dict(self._seconds))


def format_bytes(n: float) -> str:
    """``3.44 GB``, ``12.0 MB``, ``512 kB``, ``80 B`` (decimal units, as disks and links are sold)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}" if abs(n) < 100 * size else f"{n / size:.0f} {unit}"
    return f"{int(n)} B"
