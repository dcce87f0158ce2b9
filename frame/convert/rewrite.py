"""Rewrite one model's initializers as the plan says, streaming each tensor's bytes to the sink.

The graph keeps every original value name, so no consumer changes:

* float16: ``<name>_fp16`` (FLOAT16) → ``Cast(to=FLOAT)`` → ``<name>``, the layout of Optimum's fp16
  exports; the graph still computes in float32 (onnxruntime folds the Casts at load, frame widens
  per op);
* 8-bit: ``<name>_quantized`` (INT8/UINT8), ``<name>_scale`` (FLOAT, one per channel) and
  ``<name>_zero_point`` → ``DequantizeLinear(axis)`` → ``<name>`` (a float16 source gets a
  ``Cast(to=FLOAT16)`` after it unless it was only read through Cast-to-float nodes).

The new nodes go first in the node list (they read initializers only), replaced names leave
``graph.input`` (IR < 4 listed initializers there) and ``value_info``, and ``metadata_props`` record
what was done (``frame.weights``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from frame.convert import storage
from frame.convert.policy import Action, uses_by_value
from frame.convert.quantize import FP16_MAX, Scheme, quantize
from frame.convert.storage import ExternalData, TensorReader, tensor_header
from frame.engine.io.weights import WeightRef

METADATA_KEY = "frame.weights"
QUANT_TYPES = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}


class Float16Overflow(Exception):
    """A value beyond float16's range: the tensor stays float32."""


@dataclass
class Report:
    """What one conversion did, for the command's summary and the tests."""

    converted: dict[str, str] = field(default_factory=dict)   # name -> "fp16" / "uint8"
    kept: dict[str, str] = field(default_factory=dict)        # name -> reason (non-trivial ones)
    bytes_before: int = 0
    bytes_after: int = 0


class _Names:
    def __init__(self, graph: onnx.GraphProto) -> None:
        self.taken = {t.name for t in graph.initializer} | {v.name for v in graph.input}
        for node in graph.node:
            self.taken.update(node.input)
            self.taken.update(node.output)
            self.taken.add(node.name)

    def new(self, base: str) -> str:
        candidate, i = base, 1
        while candidate in self.taken:
            candidate, i = f"{base}_{i}", i + 1
        self.taken.add(candidate)
        return candidate


def _fp16_chunks(reader: TensorReader, ref: WeightRef) -> Iterator[np.ndarray]:
    for chunk in reader.chunks(ref):
        finite = np.abs(chunk, dtype=np.float32)
        if finite.size and float(np.max(finite, where=np.isfinite(finite), initial=0.0)) > FP16_MAX:
            raise Float16Overflow(ref.name)
        del finite
        yield chunk.astype(np.float16)


def _quantize_chunks(reader: TensorReader, ref: WeightRef, axis: int, scheme: Scheme,
                     scales: list[np.ndarray], zeros: list[np.ndarray]) -> Iterator[np.ndarray]:
    """8-bit codes in row blocks (axis 0: channels are rows, read a block at a time) or whole."""
    chunked = axis == 0 and not scheme.per_tensor
    parts = reader.chunks(ref, storage.CHUNK_BYTES // 2) if chunked else [reader.whole(ref)]
    for part in parts:
        result = quantize(part, axis, scheme)
        scales.append(result.scale)
        zeros.append(result.zero_point)
        yield result.q


def _only_cast_to_float(name: str, uses: dict) -> bool:
    """True if every use of ``name`` is a Cast(to=FLOAT) (then DequantizeLinear's float32 output fits)."""
    direct = uses.get(name, [])
    return bool(direct) and all(
        u.node.op_type == "Cast" and u.slot == 0 and any(a.name == "to" and a.i == TensorProto.FLOAT
                                                         for a in u.node.attribute) for u in direct)


def rewrite(proto: onnx.ModelProto, weights: dict[str, WeightRef], actions: dict[str, Action],
            reader: TensorReader, sink: ExternalData, scheme: Scheme,
            progress: Callable[[int], None] | None = None, label: str = "") -> tuple[onnx.ModelProto, Report]:
    """A new ModelProto (structure + sink references) for ``proto`` with ``actions`` applied."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    graph = out.graph
    uses = uses_by_value(proto.graph)
    names = _Names(graph)
    report = Report()
    tensors: list[TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    replaced: set[str] = set()
    for original in proto.graph.initializer:
        ref = weights.get(original.name)
        if ref is None:  # a small constant added by a graph transform (its data is inline)
            tensors.append(original)
            continue
        action = actions.get(original.name)
        kind = action.kind if action else "keep"
        report.bytes_before += ref.nbytes
        if kind == "fp16":
            half = tensor_header(names.new(f"{ref.name}_fp16"), TensorProto.FLOAT16, ref.shape)
            try:
                sink.store(half, ref.nbytes // 2, _fp16_chunks(reader, ref))
            except Float16Overflow:
                report.kept[ref.name] = "values beyond float16's range"
                kind = "keep"
            else:
                tensors.append(half)
                nodes.append(helper.make_node("Cast", [half.name], [ref.name], name=names.new(f"{ref.name}_cast"),
                                              to=TensorProto.FLOAT))
                report.converted[ref.name] = "fp16"
                report.bytes_after += ref.nbytes // 2
        elif kind == "quantize":
            tensors.extend(_quantized(ref, action.axis, reader, sink, scheme, names, nodes,
                                      cast_back=ref.dtype == np.float16 and not _only_cast_to_float(ref.name, uses)))
            report.converted[ref.name] = "uint8"
            report.bytes_after += sum(_nbytes(t) for t in tensors[-3:])
        if kind == "keep":
            if action is not None and action.reason:
                report.kept[ref.name] = action.reason
            tensors.append(_copy(original, ref, reader, sink))
            report.bytes_after += ref.nbytes
        else:
            replaced.add(ref.name)
        if progress is not None:
            progress(ref.nbytes)
    del graph.initializer[:]
    graph.initializer.extend(tensors)
    existing = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + existing)
    _drop_declarations(graph, replaced)
    if report.converted:
        _set_metadata(out, label or ", ".join(sorted(set(report.converted.values()))))
    return out, report


def _quantized(ref: WeightRef, axis: int, reader: TensorReader, sink: ExternalData, scheme: Scheme,
               names: _Names, nodes: list[onnx.NodeProto], cast_back: bool) -> list[TensorProto]:
    scales: list[np.ndarray] = []
    zeros: list[np.ndarray] = []
    q = tensor_header(names.new(f"{ref.name}_quantized"), QUANT_TYPES[scheme.dtype], ref.shape)
    sink.store(q, math.prod(ref.shape), _quantize_chunks(reader, ref, axis, scheme, scales, zeros))
    scale_array, zero_array = np.concatenate(scales), np.concatenate(zeros)
    scale = tensor_header(names.new(f"{ref.name}_scale"), TensorProto.FLOAT, scale_array.shape)
    sink.store(scale, scale_array.nbytes, [scale_array])
    zero = tensor_header(names.new(f"{ref.name}_zero_point"), QUANT_TYPES[scheme.dtype], zero_array.shape)
    sink.store(zero, zero_array.nbytes, [zero_array])
    target = names.new(f"{ref.name}_dequantized") if cast_back else ref.name
    nodes.append(helper.make_node("DequantizeLinear", [q.name, scale.name, zero.name], [target],
                                  name=names.new(f"{ref.name}_DequantizeLinear"), axis=axis))
    if cast_back:
        nodes.append(helper.make_node("Cast", [target], [ref.name], name=names.new(f"{ref.name}_cast"),
                                      to=TensorProto.FLOAT16))
    return [q, scale, zero]


def _nbytes(tensor: TensorProto) -> int:
    itemsize = {TensorProto.FLOAT: 4, TensorProto.INT8: 1, TensorProto.UINT8: 1}[tensor.data_type]
    return math.prod(tensor.dims) * itemsize


def _copy(original: TensorProto, ref: WeightRef, reader: TensorReader, sink: ExternalData) -> TensorProto:
    """The initializer unchanged; its bytes move into the new data file (inline values stay inline)."""
    if ref.value is not None:
        return original
    tensor = tensor_header(original.name, original.data_type, original.dims)
    tensor.doc_string = original.doc_string
    sink.store(tensor, ref.nbytes, reader.chunks(ref))
    return tensor


def _drop_declarations(graph: onnx.GraphProto, replaced: set[str]) -> None:
    kept_inputs = [v for v in graph.input if v.name not in replaced]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    kept_info = [v for v in graph.value_info if v.name not in replaced]
    del graph.value_info[:]
    graph.value_info.extend(kept_info)


def _set_metadata(model: onnx.ModelProto, label: str) -> None:
    entries = [p for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(entries)
    entry = model.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, label


def write_rewritten(onnx_path: Path, data_path: Path, data_name: str, proto: onnx.ModelProto,
                    weights: dict[str, WeightRef], actions: dict[str, Action], reader: TensorReader,
                    scheme: Scheme, progress: Callable[[int], None] | None = None, label: str = "") -> Report:
    """``rewrite`` into ``data_path`` (referenced from the graph as ``data_name``) and the structure
    into ``onnx_path``, both fsynced; the reader is closed, and a data file nothing went into is
    removed. The callers (``frame convert`` and the checkpoint import) make the paths atomic."""
    try:
        with open(data_path, "wb") as file:
            sink = ExternalData(file, data_name)
            out, report = rewrite(proto, weights, actions, reader, sink, scheme, progress, label)
            sink.finish()
    finally:
        reader.close()
    with open(onnx_path, "wb") as file:
        file.write(out.SerializeToString())
        file.flush()
        os.fsync(file.fileno())
    if not data_path.stat().st_size:
        data_path.unlink()
    return report
