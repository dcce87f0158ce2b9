"""The weights provider that adds each LoRA change as its weight streams (see the package docstring).

A weight whose every reader decodes it block by block (8-bit and fp16 weights fused into their op,
and any weight of the GEGLU feed-forward, float32 included: ``WeightDelta.in_op``, set at load) is
handed over as stored inside a ``LoraStored``, and ``weight_decoding.decode_block`` adds the change to
each float32 block it decodes: no float32 copy of the whole weight, the same peak as without the LoRA
plus the module's factors. Any other (a float32 weight read by a plain MatMul or Conv, an fp16 one
the executor widens) is handed over merged: a float32 copy with the change added, alive only while
its op runs. The factors
of the weight being streamed are kept until another weight's are needed (a row-streamed weight asks
once per block).
"""

from __future__ import annotations

import numpy as np

from frame.engine.errors import EngineError
from frame.engine.io.weights import WeightRef
from frame.engine.lora.delta import Factors, LoraStored, WeightDelta


class LoraProvider:
    """Wraps the model's provider; ``deltas`` by initializer name (``matching.match_loras``)."""

    def __init__(self, inner, deltas: dict[str, WeightDelta]) -> None:
        self.inner, self.deltas = inner, deltas
        self.factor_bytes_read = 0  # LoRA factor bytes read so far (per step: the benchmark's figure)
        self._last: tuple[str, Factors] | None = None

    def __getattr__(self, name: str):  # sources, close, ... of the wrapped provider
        return getattr(self.inner, name)

    def prepare(self, refs) -> None:
        self.inner.prepare(refs)

    def release(self, ref: WeightRef) -> None:
        if self._last is not None and self._last[0] == ref.name:
            self._last = None
        self.inner.release(ref)

    def _factors(self, delta: WeightDelta) -> Factors:
        if self._last is None or self._last[0] != delta.weight:
            self._last = None  # the previous weight's factors go before these are read
            self._last = (delta.weight, delta.factors())
            self.factor_bytes_read += delta.nbytes
        return self._last[1]

    def _with_delta(self, ref: WeightRef, array: np.ndarray, offset: int):
        delta = self.deltas[ref.name]
        if delta.in_op:
            return LoraStored(array, delta, self._factors(delta), offset)
        if array.dtype not in (np.float32, np.float16):  # 8-bit codes: only a decoding op may add to them
            raise EngineError(f"{delta.label}: weight {ref.name!r} ({array.dtype}) is read by an op that does "
                              "not decode it, so its LoRA change cannot be added")
        return delta.merged(array, self._factors(delta), offset)

    def get(self, ref: WeightRef) -> np.ndarray:
        array = self.inner.get(ref)
        return array if ref.name not in self.deltas else self._with_delta(ref, array, 0)

    def get_rows(self, ref: WeightRef, rows: np.ndarray) -> np.ndarray:
        get_rows = getattr(self.inner, "get_rows", None)
        if get_rows is not None:
            array = get_rows(ref, rows)
        else:
            array = np.array(self.inner.get(ref)[rows])
            self.inner.release(ref)
        if ref.name not in self.deltas:
            return array
        if rows.size and int(rows[-1]) - int(rows[0]) + 1 != rows.size:
            raise EngineError(f"weight {ref.name!r} has a LoRA change and was asked for scattered rows")
        return self._with_delta(ref, array, int(rows[0]) if rows.size else 0)
