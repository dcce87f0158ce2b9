"""Every tensor's shape in a model at given input sizes, from the graph alone (no weight is read).

ONNX shape inference (``onnx.shape_inference``) knows every standard op's shape rule, but exported
Stable Diffusion graphs compute their reshape targets at run time (``Shape → Gather → Div → Concat →
Reshape`` for the attention heads), and onnx's own value propagation gives up on part of those
chains: on the SD 1.5 UNet 128 Reshapes and the 112 MatMuls after them come out with unknown dims.
So this module alternates two passes until nothing changes:

1. ONNX shape inference with the inputs fixed to concrete sizes;
2. value propagation: a ``Shape``/``Size`` of a tensor whose shape is now known becomes a constant,
   and so does any small node all of whose inputs are constants, evaluated with the engine's own
   kernel (the same code that would run it). The constants replace their nodes in a working copy.

Only the values of small tensors are ever computed (at most ``MAX_VALUE_BYTES``); weights stay
shapes (their dims come from the structure the protobuf scanner read, or from OnnxStream's
model.txt). A dimension that is still unknown after the last round is ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from frame.engine import graph as g
from frame.engine.io.weights import WeightRef
from frame.engine.ops.cost import Shape, size

MAX_VALUE_BYTES = 64 << 10
MAX_ROUNDS = 12
_NEVER_EVALUATE = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                   "Bernoulli", "If", "Loop", "Scan")


def _dims(value: onnx.ValueInfoProto) -> Shape | None:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tensor.shape.dim)


def _working_copy(proto: onnx.ModelProto, weights: Mapping[str, WeightRef],
                  input_shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """A copy with concrete input dims, no stale value_info, and every weight declared by its dims.

    Weights without data (the scanner dropped their bytes; OnnxStream keeps them outside the proto)
    become typed graph inputs, which is all shape inference needs of them; small inline constants
    stay initializers so that shape chains reading them can be evaluated.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    del graph.value_info[:]
    for value in graph.output:
        value.type.tensor_type.ClearField("shape")
    known_inputs = {v.name for v in graph.input}
    unknown = set(input_shapes) - known_inputs
    if unknown:
        raise ValueError(f"the model has no input(s) {', '.join(sorted(unknown))} "
                         f"(inputs: {', '.join(v.name for v in graph.input)})")
    for value in graph.input:
        if value.name in input_shapes:
            shape = value.type.tensor_type.shape
            shape.ClearField("dim")
            for size in input_shapes[value.name]:
                shape.dim.add().dim_value = int(size)
    inline = {t.name for t in graph.initializer if _has_data(t)}
    kept = [t for t in graph.initializer if t.name in inline]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    in_proto = {t.name for t in proto.graph.initializer}
    for name, ref in weights.items():
        if name in inline or name in known_inputs:
            continue
        # weights kept outside the proto (OnnxStream's .bin files) are typed as the engine computes:
        # float16 in float32, or ops such as Resize (float32 scales) would not infer
        widen = name not in in_proto and ref.dtype == np.float16
        if ref.value is not None and ref.nbytes <= MAX_VALUE_BYTES:
            value = np.asarray(ref.value)
            graph.initializer.append(numpy_helper.from_array(value.astype(np.float32) if widen else value, name))
        else:
            elem = onnx.TensorProto.FLOAT if widen else helper.np_dtype_to_tensor_dtype(ref.dtype)
            graph.input.append(helper.make_tensor_value_info(name, elem, list(ref.shape)))
    return copy


def _has_data(tensor: onnx.TensorProto) -> bool:
    """Whether the initializer carries its values (the scanner strips large ones' bytes)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    return bool(tensor.raw_data or tensor.float_data or tensor.int64_data or tensor.int32_data
                or tensor.double_data or tensor.uint64_data) or math.prod(tensor.dims) == 0


def engine_itemsize(elem_type: int) -> int:
    """Bytes per element as the engine holds the value: float16 is computed in float32."""
    if elem_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.UNDEFINED):
        return 4
    try:
        return int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4


def _inferred_shapes(proto: onnx.ModelProto, itemsizes: dict[str, int]) -> dict[str, Shape]:
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    shapes: dict[str, Shape] = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = _dims(value)
        if dims is not None:
            shapes[value.name] = dims
        itemsizes[value.name] = engine_itemsize(value.type.tensor_type.elem_type)
    for tensor in inferred.graph.initializer:
        shapes[tensor.name] = tuple(int(d) for d in tensor.dims)
        itemsizes[tensor.name] = engine_itemsize(tensor.data_type)
    return shapes


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer if _has_data(t)}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute:
            attr = node.attribute[0]
            if attr.name == "value":
                values[node.output[0]] = numpy_helper.to_array(attr.t)
            elif attr.name in ("value_int", "value_float"):
                values[node.output[0]] = np.array(attr.i if attr.name == "value_int" else attr.f)
            elif attr.name in ("value_ints", "value_floats"):
                values[node.output[0]] = np.array(list(attr.ints if attr.name == "value_ints" else attr.floats))
    return values


def _shape_value(node: g.Node, shape: Shape | None) -> np.ndarray | None:
    if shape is None or any(d is None for d in shape):
        return None
    if node.op_type == "Size":
        return np.array(math.prod(shape), dtype=np.int64)
    rank = len(shape)
    start = node.attrs.get("start", 0)
    end = node.attrs.get("end", rank)
    return np.array(shape[slice(start, end)], dtype=np.int64)


def _evaluate(node: g.Node, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...] | None:
    """The node's outputs from constant inputs with the engine's kernel, or None (unknown/too big)."""
    if node.spec is None or node.domain or node.op_type in _NEVER_EVALUATE or "_scope" in node.spec.hints:
        return None
    if not all(not name or name in values for name in node.inputs):
        return None
    args: list[Any] = [values[name] if name else None for name in node.inputs]
    while args and args[-1] is None:
        args.pop()
    try:
        result = node.spec.fn(*args, **node.attrs)
    except Exception:  # noqa: BLE001 - a node that fails on constants stays unknown
        return None
    arrays = tuple(np.asarray(r) for r in (result if isinstance(result, tuple) else (result,)))
    if sum(a.nbytes for a in arrays) > MAX_VALUE_BYTES:
        return None
    return arrays


def _propagate(nodes: list[g.Node], shapes: Mapping[str, Shape], values: dict[str, np.ndarray]) -> list[g.Node]:
    """Nodes whose every output became a constant in this pass (their values added to ``values``)."""
    done = []
    for node in nodes:
        outputs = [o for o in node.outputs if o]
        if not outputs or all(o in values for o in outputs):
            continue
        if node.op_type in ("Shape", "Size") and node.inputs:
            value = _shape_value(node, shapes.get(node.inputs[0]))
            results = None if value is None else (value,)
        else:
            results = _evaluate(node, values)
        if results is None or len(results) < len(outputs):
            continue
        for name, array in zip(node.outputs, results):
            if name:
                values[name] = array
        done.append(node)
    return done


def _fold_into(proto: onnx.ModelProto, folded: list[g.Node], values: Mapping[str, np.ndarray]) -> None:
    """Replace the folded nodes of the working copy by initializers holding their values."""
    names = {o for node in folded for o in node.outputs if o}
    keep = [n for n in proto.graph.node if not any(o in names for o in n.output)]
    del proto.graph.node[:]
    proto.graph.node.extend(keep)
    graph_outputs = {o.name for o in proto.graph.output}
    for name in sorted(names):
        if name not in graph_outputs:
            proto.graph.initializer.append(numpy_helper.from_array(np.asarray(values[name]), name))


@dataclass
class ShapeTable:
    """``shapes[name]``: dims (None where unknown); ``itemsizes[name]``: bytes per element in the engine."""

    shapes: dict[str, Shape]
    itemsizes: dict[str, int]

    def nbytes(self, name: str) -> int:
        """Bytes of value ``name`` as the engine holds it (0 if its shape is not fully known)."""
        return size(self.shapes.get(name)) * self.itemsizes.get(name, 4)


def infer_shapes(proto: onnx.ModelProto, weights: Mapping[str, WeightRef], nodes: list[g.Node],
                 input_shapes: Mapping[str, Sequence[int]]) -> ShapeTable:
    """Shape of every value (inputs, weights, node outputs) with the graph inputs at ``input_shapes``.

    ``proto``, ``weights`` and ``nodes`` are a ``frame.engine.model.read_structure`` result (ONNX
    file or OnnxStream folder); none of them is modified.
    """
    work = _working_copy(proto, weights, input_shapes)
    values = _constants(work.graph)
    pending = g.topological_order(list(nodes), {v.name for v in work.graph.input} | set(weights) | set(values))
    itemsizes: dict[str, int] = {}
    shapes = _inferred_shapes(work, itemsizes)
    for _ in range(MAX_ROUNDS):
        folded = _propagate(pending, shapes, values)
        if not folded:
            break
        gone = {id(n) for n in folded}
        pending = [n for n in pending if id(n) not in gone]
        _fold_into(work, folded, values)
        shapes = _inferred_shapes(work, itemsizes)
    for name, array in values.items():
        shapes[name] = tuple(int(d) for d in np.shape(array))
        itemsizes[name] = np.asarray(array).dtype.itemsize
    for name, ref in weights.items():
        shapes[name] = tuple(int(d) for d in ref.shape)
        itemsizes[name] = ref.dtype.itemsize
    return ShapeTable(shapes, itemsizes)


def unknown_outputs(nodes: list[g.Node], table: ShapeTable) -> list[str]:
    """Node outputs whose shape is not fully known (for diagnostics and tests)."""
    shapes = table.shapes
    return [o for n in nodes for o in n.outputs
            if o and (shapes.get(o) is None or any(d is None for d in shapes[o]))]
