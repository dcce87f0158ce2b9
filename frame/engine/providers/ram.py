"""RAM provider: read every weight once, keep it for all later runs (for machines with memory)."""

from __future__ import annotations

import numpy as np

from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.weights import WeightRef
from frame.engine.providers.base import ReadingProvider
from frame.engine.providers.registry import register_provider


@register_provider("ram")
class Ram(ReadingProvider):
    """Caches each weight on first use; cached arrays are read-only so no op can corrupt them."""

    def __init__(self, http_options: dict | None = None, http: HttpSettings | None = None) -> None:
        super().__init__(http_options, http)
        self._cache: dict[tuple, np.ndarray] = {}

    def get(self, ref: WeightRef) -> np.ndarray:
        key = (ref.name, ref.location, ref.offset)  # names repeat across If/Loop bodies
        array = self._cache.get(key)
        if array is None:
            array = self.read(ref)
            array.flags.writeable = False
            self._cache[key] = array
        return array

    def get_rows(self, ref: WeightRef, rows: np.ndarray) -> np.ndarray:
        """The whole table is cached (this provider trades memory for speed), then indexed."""
        return self.get(ref)[rows]

    @property
    def cached_bytes(self) -> int:
        return sum(a.nbytes for a in self._cache.values())

    def close(self) -> None:
        self._cache.clear()
        super().close()
