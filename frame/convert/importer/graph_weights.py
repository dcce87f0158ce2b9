"""One graph of an import written with its weights streamed from the checkpoint, as ``convert`` does.

The graph builders declare each weight as a structure-only initializer named by its diffusers key.
``frame model convert``'s rewrite (``frame.convert.rewrite``) then plans fp16/uint8 per initializer
from the graph (``frame.convert.policy``) and streams each tensor's bytes into the new data file; it
asks a reader for the tensor's rows. ``StreamReader`` is that reader for a checkpoint: it reads the
tensor a key names through the component's ``Take`` (one at a time; an OpenCLIP in_proj read once for
its q, k and v) instead of from an ONNX data file. So an import converts with exactly the code, the
policy and the scheme a conversion uses, and writes the same layout (``model.onnx`` +
``model.onnx_data``, Cast/DequantizeLinear nodes, ``frame.weights`` metadata).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx

from frame.convert.checkpoint.components import Component, file_position
from frame.convert.files import DEFAULT_SCHEME, MIN_QUANT_OPSET
from frame.convert.policy import Policy, plan
from frame.convert.rewrite import Report, write_rewritten
from frame.convert.storage import CHUNK_BYTES
from frame.engine.io.weights import WeightRef
from frame.errors import FrameError

STREAM = "checkpoint:"  # WeightRef.location of a tensor that comes from the checkpoint


class GraphMismatch(FrameError):
    """A built graph declares a weight the checkpoint does not have, or with another shape: a bug in
    frame (builder and mapping disagree), reported with both names and shapes."""


class StreamReader:
    """``TensorReader``'s interface (``rows``/``whole``/``chunks``) over a component's checkpoint."""

    def __init__(self, component: Component) -> None:
        self.component = component
        self._source: str | None = None
        self._array: np.ndarray | None = None

    def whole(self, ref: WeightRef) -> np.ndarray:
        take = self.component.takes[ref.name]
        if take.source != self._source:
            self._array = None  # drop the previous tensor before reading the next
            self._array = self.component.checkpoint.read(take.source)
            self._source = take.source
        return take.apply(self._array)

    def rows(self, ref: WeightRef, first: int, count: int) -> np.ndarray:
        return self.whole(ref)[first:first + count]

    def chunks(self, ref: WeightRef, chunk_bytes: int | None = None) -> Iterator[np.ndarray]:
        """Row blocks of about ``chunk_bytes`` (as float32). A large tensor taken as it is stored (or
        as a block of its rows) is read a block at a time, so SD's 151 MB token embedding never sits
        in memory whole; a transposed or squeezed one is small and read whole."""
        chunk_bytes = chunk_bytes or CHUNK_BYTES
        take = self.component.takes[ref.name]
        shape = ref.shape
        row_bytes = max(1, math.prod(shape[1:]) * 4) if shape else 1
        step = max(1, chunk_bytes // row_bytes)
        if not shape or shape[0] <= step or take.transpose or take.squeeze:
            array = self.whole(ref)
            for first in range(0, max(1, array.shape[0] if array.ndim else 1), step):
                yield array[first:first + step] if array.ndim else array
            return
        base = take.rows[0] if take.rows else 0
        for first in range(0, shape[0], step):
            count = min(step, shape[0] - first)
            yield self.component.checkpoint.read_rows(take.source, base + first, count)

    def close(self) -> None:
        self._array, self._source = None, None


def weight_refs(model: onnx.ModelProto, component: Component) -> dict[str, WeightRef]:
    """A ``WeightRef`` per declared weight, checked against the checkpoint's shapes."""
    shapes = component.shapes()
    refs = {}
    for tensor in model.graph.initializer:
        declared = tuple(int(d) for d in tensor.dims)
        if tensor.name not in shapes:
            raise GraphMismatch(f"{component.name}: the graph declares weight {tensor.name!r} {list(declared)}, "
                                "which the checkpoint mapping does not give")
        if shapes[tensor.name] != declared:
            raise GraphMismatch(f"{component.name}: weight {tensor.name!r} is {list(declared)} in the graph but "
                                f"{list(shapes[tensor.name])} in the checkpoint")
        refs[tensor.name] = WeightRef(tensor.name, np.dtype(np.float32), declared, STREAM + tensor.name, 0,
                                      math.prod(declared) * 4)
    return refs


def in_file_order(model: onnx.ModelProto, component: Component) -> onnx.ModelProto:
    """The initializers sorted by where their source lies in the checkpoint (forward reads over HTTP)."""
    takes = component.takes
    ordered = sorted(model.graph.initializer, key=lambda t: file_position(component.checkpoint, takes[t.name].source)
                     if t.name in takes else 0)
    del model.graph.initializer[:]
    model.graph.initializer.extend(ordered)
    return model


def write_graph(model: onnx.ModelProto, component: Component, folder: Path, weights: str,
                progress: Callable[[int], None] | None = None, policy: Policy | None = None) -> Report:
    """``folder/model.onnx`` (+ ``model.onnx_data``) for ``model`` with ``component``'s weights in
    ``weights`` precision (fp32, fp16, uint8), fsynced."""
    model = in_file_order(model, component)
    refs = weight_refs(model, component)
    actions = {} if weights == "fp32" else plan(model.graph, refs, weights, policy or Policy())
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset < MIN_QUANT_OPSET and any(a.kind == "quantize" for a in actions.values()):
        raise GraphMismatch(f"{component.name}: opset {opset} has no per-channel DequantizeLinear")
    labels = {"fp32": "", "fp16": "fp16", "uint8": f"uint8 ({DEFAULT_SCHEME.label}, per channel)"}
    label = labels[weights]
    reader = StreamReader(component)
    data_path, onnx_path = folder / "model.onnx_data", folder / "model.onnx"
    return write_rewritten(onnx_path, data_path, data_path.name, model, refs, actions, reader, DEFAULT_SCHEME,
                           progress, label)
