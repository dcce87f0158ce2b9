"""model.txt operations → the engine's graph: ONNX nodes, WeightRefs, graph inputs and outputs.

The result has the shape ``frame.engine.model`` gets from an ONNX file (a ModelProto without weight
bytes, a WeightRef per weight, every node bound to its kernel or a problem line), so planning,
fusion, streaming and the providers work on it unchanged. What the format leaves implicit is made
explicit here:

* graph inputs are the values some op reads and none writes; graph outputs the values some op writes
  and none reads, plus ``extra_outputs`` (OnnxStream's ``m_extra_outputs``: SDXL's text encoders
  hand out a hidden state that later layers also read);
* names are unescaped (``encoder_5F_hidden_5F_states`` → ``encoder_hidden_states``) and may be
  renamed by the caller;
* a ``uint8[scale,zero_point]`` weight becomes the uint8 file plus a ``DequantizeLinear`` right
  before its first use, so the weight streams at one byte per value;
* model.txt carries no opset: each node gets 17 unless its form is an older or newer one (``axes``
  as an attribute of Unsqueeze, ``split`` of Split, ...);
* value types are inferred (see ``dtypes``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from frame.engine.errors import ModelFormatError
from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.onnxstream import dtypes
from frame.engine.onnxstream.attributes import node_attributes
from frame.engine.onnxstream.names import unescape
from frame.engine.onnxstream.refs import weight_ref
from frame.engine.onnxstream.text import OpLine, TensorDecl
from frame.engine.ops.lookup import bind_node
from frame.engine.ops.registry import UnsupportedOp

DEFAULT_OPSET = 17
NUMPY_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8)}


@dataclass(frozen=True)
class WeightFile:
    """Where one weight named in model.txt lives, and whether that file is channels-last."""

    location: str
    nhwc: bool = False


@dataclass
class Structure:
    """What ``frame.engine.model.Model`` is built from (the same fields as for an ONNX file)."""

    proto: onnx.ModelProto
    weights: dict[str, WeightRef]
    nodes: list[Node]
    problems: list[str]
    lines: dict[str, int] = field(default_factory=dict)  # node name → model.txt line, for messages


def weight_name(file_name: str) -> str:
    """A readable name for a weight file: ``model_2E_0_2E_conv_2E_weight_nchw.bin`` → ``model.0.conv.weight``."""
    stem = file_name[:-4] if file_name.endswith(".bin") else file_name
    for suffix, label in (("_nchw", ""), ("_nhwc", ""), ("_transposed", "_transposed")):
        if stem.endswith(suffix):
            return unescape(stem[: -len(suffix)]) + label
    return unescape(stem)


def node_opset(op: OpLine) -> int:
    """The opset whose form of the op this line uses (model.txt does not record one)."""
    keys = {key for key, _ in op.attrs}
    inputs = len(op.inputs)
    legacy = {"Unsqueeze": "axes", "Squeeze": "axes", "Split": "split", "ReduceSum": "axes"}
    if op.op_type in legacy and legacy[op.op_type] in keys:
        return 12
    if op.op_type == "Split" and "num_outputs" in keys:
        return 18
    if op.op_type.startswith("Reduce") and op.op_type != "ReduceSum" and inputs == 2:
        return 18
    if op.op_type == "Resize" and inputs == 2:
        return 10
    if (op.op_type == "Pad" and "pads" in keys) or (op.op_type == "Clip" and keys & {"min", "max"}):
        return 10
    if op.op_type in ("Slice", "Upsample") and "starts" in keys | ({"scales"} if op.op_type == "Upsample" else set()):
        return 9
    return DEFAULT_OPSET


class GraphBuilder:
    """Turns parsed lines into ONNX nodes and WeightRefs (see the module docstring)."""

    def __init__(self, resolve: Callable[[str], WeightFile], rename: Mapping[str, str], where: str) -> None:
        self.resolve = resolve
        self.rename = dict(rename)
        self.where = where
        self.nodes: list[tuple[onnx.NodeProto, int, int]] = []  # (node, opset, model.txt line)
        self.weights: dict[str, WeightRef] = {}
        self.weight_values: dict[str, str] = {}  # weight file name → the value name consumers read
        self.declared: dict[str, TensorDecl] = {}  # first declaration of each graph value
        self.int64_weights: set[str] = set()

    def value(self, escaped: str) -> str:
        name = unescape(escaped)
        return self.rename.get(name, name)

    def add(self, op: OpLine) -> None:
        inputs = []
        for decl in op.inputs:
            if decl is None:
                inputs.append("")
            elif decl.is_weight:
                inputs.append(self._weight(decl, op))
            else:
                name = self.value(decl.name)
                self.declared.setdefault(name, decl)
                inputs.append(name)
        outputs = []
        for decl in op.outputs:
            name = self.value(decl.name)
            self.declared.setdefault(name, decl)
            outputs.append(name)
        opset = node_opset(op)
        try:
            attrs = node_attributes(op.op_type, opset, op.attrs)
        except ValueError as exc:
            raise ModelFormatError(f"{self.where} line {op.number}: {exc}") from None
        node = helper.make_node(op.op_type, inputs, outputs, name=op.name)
        node.attribute.extend(attrs)
        self.nodes.append((node, opset, op.number))

    def _weight(self, decl: TensorDecl, op: OpLine) -> str:
        """The value name an op reads for weight ``decl`` (registering the file the first time)."""
        file_name = decl.name
        known = self.weight_values.get(file_name)
        ref_name = weight_name(file_name)
        dtype = NUMPY_DTYPES[decl.dtype or "float32"]
        if known is not None:
            ref = self.weights[ref_name + (":uint8" if dtype == np.uint8 else "")]
            if ref.dtype != dtype or ref.shape != decl.dims:
                raise ModelFormatError(f"{self.where} line {op.number}: {file_name} is declared as "
                                       f"{decl.dtype}{list(decl.dims)} here but {ref.dtype}{list(ref.shape)} before")
            return known
        if any(d == 0 for d in decl.dims):
            raise ModelFormatError(f"{self.where} line {op.number}: weight {file_name} has a dynamic (0) dimension")
        where = self.resolve(file_name)
        if dtype == np.int64:
            self.int64_weights.add(ref_name)
        if dtype != np.uint8:
            self.weights[ref_name] = weight_ref(ref_name, dtype, decl.dims, where.location, where.nhwc)
            self.weight_values[file_name] = ref_name
            return ref_name
        raw = f"{ref_name}:uint8"
        self.weights[raw] = weight_ref(raw, dtype, decl.dims, where.location, where.nhwc)
        scale, zero = f"{ref_name}:scale", f"{ref_name}:zero_point"
        self.weights[scale] = _inline(scale, np.float32(decl.scale))
        self.weights[zero] = _inline(zero, np.uint8(decl.zero_point))
        dequantize = helper.make_node("DequantizeLinear", [raw, scale, zero], [ref_name], name=f"{ref_name}:dequantize")
        self.nodes.append((dequantize, DEFAULT_OPSET, op.number))
        self.weight_values[file_name] = ref_name
        return ref_name

    def cast_integer_factors(self, graph_inputs: set[str]) -> None:
        """``Mul(int64 x, float32 weight)``: the weight was int64 before onnx2txt; cast it back."""
        ints = dtypes.integer_values((n for n, _, _ in self.nodes), self.int64_weights | graph_inputs)
        weight_values = set(self.weight_values.values())
        rebuilt = []
        for node, opset, line in self.nodes:
            if (node.op_type == "Mul" and len(node.input) == 2 and node.input[0] in ints
                    and node.input[1] in weight_values and node.input[1] not in ints):
                cast_name = f"{node.input[1]}:int64"
                rebuilt.append((helper.make_node("Cast", [node.input[1]], [cast_name], to=dtypes.INT64,
                                                 name=f"{node.name}:cast"), DEFAULT_OPSET, line))
                node.input[1] = cast_name
            rebuilt.append((node, opset, line))
        self.nodes = rebuilt


def _inline(name: str, value: np.generic) -> WeightRef:
    array = np.asarray(value)
    return WeightRef(name, array.dtype, (), value=array, length=int(array.nbytes))


def graph_io(ops: Sequence[OpLine], builder: GraphBuilder, extra_outputs: Sequence[str]
             ) -> tuple[list[str], list[str]]:
    """(inputs, outputs): values read but never written, values written but never read (+ extras)."""
    produced: dict[str, None] = {}
    consumed: set[str] = set()
    inputs: dict[str, None] = {}
    for node, _, _ in builder.nodes:
        for name in node.input:
            if name and name not in builder.weights:
                consumed.add(name)
                if name not in produced:
                    inputs.setdefault(name, None)
        for name in node.output:
            produced.setdefault(name, None)
    missing = [name for name in extra_outputs if name not in produced]
    if missing:
        raise ModelFormatError(f"{builder.where}: no operation computes the requested output(s) "
                               f"{', '.join(missing)}")
    outputs = [name for name in produced if name not in consumed]
    outputs += [name for name in extra_outputs if name not in outputs]
    return list(inputs), outputs


def _value_info(name: str, decl: TensorDecl | None, elem_type: int) -> onnx.ValueInfoProto:
    dims = None if decl is None else [d if d > 0 else None for d in decl.dims]
    return helper.make_tensor_value_info(name, elem_type, dims)


def build_structure(ops: Sequence[OpLine], resolve: Callable[[str], WeightFile], where: str,
                    rename: Mapping[str, str] | None = None, extra_outputs: Sequence[str] = (),
                    transforms: Sequence[Callable[[GraphBuilder, list[str]], None]] = ()) -> Structure:
    """The engine's structure for ``ops``; ``transforms`` rewrite the node list before binding
    (e.g. W8A8 activation quantisation, see ``activations``)."""
    builder = GraphBuilder(resolve, rename or {}, where)
    for op in ops:
        builder.add(op)
    inputs, outputs = graph_io(ops, builder, extra_outputs)
    index_inputs = dtypes.index_inputs([n for n, _, _ in builder.nodes], inputs)
    builder.cast_integer_factors(index_inputs)
    for transform in transforms:
        transform(builder, outputs)
    ints = dtypes.integer_values((n for n, _, _ in builder.nodes), builder.int64_weights | index_inputs)
    float_type, int_type = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    graph = helper.make_graph(
        [n for n, _, _ in builder.nodes], "onnxstream",
        [_value_info(n, builder.declared.get(n), int_type if n in index_inputs else float_type) for n in inputs],
        [_value_info(n, builder.declared.get(n), int_type if n in ints else float_type) for n in outputs])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", DEFAULT_OPSET)])
    nodes, problems, lines = _bind(builder.nodes)
    return Structure(proto, builder.weights, nodes, problems, lines)


def _bind(protos: list[tuple[onnx.NodeProto, int, int]]) -> tuple[list[Node], list[str], dict[str, int]]:
    nodes, problems, lines = [], [], {}
    for proto, opset, line in protos:
        node = Node(proto.name, proto.op_type, "", list(proto.input), list(proto.output), {})
        lines[proto.name] = line
        try:
            node.spec, node.attrs = bind_node(proto, opset)
        except UnsupportedOp as exc:
            problems.append(f"node {proto.name!r} ({proto.op_type}, model.txt line {line}): {exc}")
        nodes.append(node)
    return nodes, problems, lines


def weight_bytes(decl: TensorDecl) -> int:
    return math.prod(decl.dims) * NUMPY_DTYPES[decl.dtype or "float32"].itemsize
