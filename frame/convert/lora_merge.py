"""``frame model convert --lora FILE:SCALE``: LoRAs merged into the converted weights, for a fixed style.

The converter reads every weight through a ``TensorReader`` in row blocks; ``MergingReader`` adds
each LoRA's change to the rows it reads (``frame.engine.lora.WeightDelta.block``, float32, then back
to the stored dtype), so a merged model is written in one pass with no whole float32 copy of a weight.
Which LoRA part a file takes comes from its folder (``unet/``, ``text_encoder/``, ``text_encoder_2/``
in a diffusers export; a lone file counts as a UNet). A source whose weights are already 8-bit cannot
take a merge (its rows are codes, not values): convert the float model instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from frame.convert.storage import TensorReader
from frame.engine import graph as g
from frame.engine.io.weights import WeightRef
from frame.engine.lora import LoraFile, LoraUse, WeightDelta, match_loras
from frame.engine.lora.files import COMPONENTS
from frame.errors import UsageError

log = logging.getLogger(__name__)


class MergingReader(TensorReader):
    def __init__(self, deltas: dict[str, WeightDelta]) -> None:
        super().__init__()
        self.deltas = deltas
        self._last: tuple[str, list] | None = None

    def rows(self, ref: WeightRef, first: int, count: int) -> np.ndarray:
        rows = super().rows(ref, first, count)
        delta = self.deltas.get(ref.name)
        if delta is None:
            return rows
        if rows.dtype not in (np.float32, np.float16):
            raise UsageError(f"{delta.label}: weight {ref.name!r} is stored as {rows.dtype}; a LoRA can only be "
                             "merged into float32 or float16 weights (convert the float model)")
        if self._last is None or self._last[0] != ref.name:
            self._last = (ref.name, delta.factors())
        merged = rows.astype(np.float32) + delta.block(self._last[1], 0, first, first + count)
        return merged.astype(rows.dtype)


def component_of(path: Path) -> str:
    return path.parent.name if path.parent.name in COMPONENTS else "unet"


def merging_reader(path: Path, proto: onnx.ModelProto, weights: dict[str, WeightRef],
                   loras: Sequence[tuple[LoraFile, float]]) -> TensorReader:
    """A plain ``TensorReader``, or one that merges the LoRAs' part for this file (said in the log)."""
    component = component_of(path)
    uses = [LoraUse(lora.name, lora.modules(component), scale) for lora, scale in loras if lora.modules(component)]
    if not uses:
        return TensorReader()
    nodes, _ = g.build_nodes(proto.graph, g.opset_table(proto))
    deltas, report = match_loras(nodes, weights, uses)
    for line in report.lines():
        log.warning("%s: %s", path, line) if "not applied" in line else log.info("%s: %s", path, line)
    return MergingReader(deltas)
