"""Which values of an OnnxStream graph are integers: model.txt types weights, never graph values.

OnnxStream keeps shape arithmetic in int64 and everything else in float. frame needs the types at load
for three things: the dtype of each graph input (token ids feed a Gather as indices), the dtype each
graph output is declared with, and one converter quirk — onnx2txt stores an int64 weight multiplied
by a value (``Mul`` input 1) as float32, which OnnxStream multiplies back in int64; the builder puts
a ``Cast`` to int64 in front of such a weight when the other factor is an integer (shape arithmetic
in dynamic-shape exports, e.g. ``batch * heads``).
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

INT64 = onnx.TensorProto.INT64

# Ops whose outputs are int64 whatever their inputs are.
_INT_SOURCES = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero"}
# Ops whose output has the type of their first (data) input.
_FOLLOW_FIRST = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Slice", "Gather", "GatherElements",
                 "Expand", "Identity", "Tile", "Neg", "Abs", "Split", "ReduceSum", "ReduceProd", "ReduceMin",
                 "ReduceMax", "CumSum", "Range", "Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Concat"}
# Ops that pass integer data straight to a position where only integers are allowed.
_INDEX_POSITIONS = {("Gather", 1), ("GatherElements", 1), ("GatherND", 1), ("ScatterND", 1),
                    ("ScatterElements", 1), ("OneHot", 0)}
_PASS_THROUGH = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Slice", "Identity", "Concat",
                 "Expand", "Tile"}


def _attr(node: onnx.NodeProto, name: str):
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return None


def integer_values(nodes: Iterable[onnx.NodeProto], integer_seeds: set[str]) -> set[str]:
    """Names of the int64 values, propagated forward through ``nodes`` (in execution order)."""
    ints = set(integer_seeds)
    for node in nodes:
        op = node.op_type
        integer = False
        if op in _INT_SOURCES:
            integer = True
        elif op == "Cast":
            integer = _attr(node, "to") == INT64
        elif op == "ConstantOfShape":
            value = _attr(node, "value")
            integer = value is not None and value.data_type == INT64
        elif op == "Where":
            integer = len(node.input) > 1 and node.input[1] in ints
        elif op in _FOLLOW_FIRST:
            inputs = node.input if op in ("Concat", "Add", "Sub", "Mul", "Div", "Mod", "Min", "Max") else node.input[:1]
            integer = any(name in ints for name in inputs)
        if integer:
            ints.update(o for o in node.output if o)
    return ints


def index_inputs(nodes: list[onnx.NodeProto], graph_inputs: Iterable[str]) -> set[str]:
    """Graph inputs that reach an index position (Gather's indices, ...) through shape-only ops."""
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in nodes:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, position))
    found = set()
    for start in graph_inputs:
        pending, seen = [start], {start}
        while pending:
            name = pending.pop()
            for node, position in consumers.get(name, []):
                if (node.op_type, position) in _INDEX_POSITIONS:
                    found.add(start)
                    pending.clear()
                    break
                if node.op_type in _PASS_THROUGH and (position == 0 or node.op_type == "Concat"):
                    for out in node.output:
                        if out and out not in seen:
                            seen.add(out)
                            pending.append(out)
    return found
