"""What one ONNX node costs: multiply-adds, the kind of kernel that does them, bytes it touches.

Multiply-adds (MACs) follow the ops' definitions, from the shapes alone:

* ``Conv``: every output element sums ``C/group × kh × kw`` products: ``prod(out) × prod(w[1:])``;
* ``ConvTranspose``: every input element is scattered to ``M/group × kh × kw`` outputs:
  ``prod(in) × prod(w[1:])``;
* ``MatMul``/``Gemm`` (and their integer/quantised forms): ``prod(out) × K``;
* ``Einsum``: the product of the sizes of all distinct subscripts.

The kind decides which measured throughput applies (``frame.estimate.machine``): ``conv``; ``matmul``
when one operand is a weight (projections, feed-forward layers); ``attention`` when both operands are
activations (Q·Kᵀ and scores·V). Every other op is memory-bound: its cost is the bytes it reads and
writes (activations only; weights are counted as fetched bytes, not here) times the number of passes
its kernel makes over them (``PASSES``, read off the kernels in ``frame.engine.ops``: a norm reads its
input for the mean, writes the centred values, reads them for the variance, scales and shifts them
in place). Views (Reshape, Transpose, Slice, ...) and shape arithmetic move no data: 0 passes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from frame.estimate.shapes import Shape

CONV, MATMUL, ATTENTION = "conv", "matmul", "attention"
KINDS = (CONV, MATMUL, ATTENTION)
_CONV_OPS = {"Conv": (0, 1), "ConvInteger": (0, 1), "QLinearConv": (0, 3)}
_MATMUL_OPS = {"MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3), "Gemm": (0, 1),
               "FusedMatMul": (0, 1)}
_WEIGHT_PATH_OPS = ("Cast", "DequantizeLinear", "Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze")
_NO_DATA = ("Shape", "Size", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Expand",
            "Slice", "Split", "Constant", "ConstantOfShape", "Range", "Gather", "Dropout")
PASSES = {  # passes over (inputs + outputs) beyond the one every op makes
    "InstanceNormalization": 3.5, "LayerNormalization": 3.5, "GroupNormalization": 3.5,
    "BatchNormalization": 2.0, "Softmax": 4.0, "LogSoftmax": 4.0, "Erf": 4.0, "Gelu": 4.0,
    "ReduceMean": 1.0, "Resize": 2.0,
}


@dataclass(frozen=True)
class Work:
    """One node's compute: ``macs`` of ``kind`` (None for memory-bound ops) and activation bytes."""

    kind: str | None
    macs: int
    element_bytes: int


def _known(shape: Shape | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _size(shape: Shape | None) -> int:
    return math.prod(shape) if _known(shape) else 0  # type: ignore[arg-type]


def conv_macs(out_shape: Shape, w_shape: Shape) -> int:
    return _size(out_shape) * _size(w_shape[1:])


def conv_transpose_macs(in_shape: Shape, w_shape: Shape) -> int:
    return _size(in_shape) * _size(w_shape[1:])


def matmul_macs(a_shape: Shape, out_shape: Shape, trans_a: bool = False) -> int:
    if not a_shape:
        return 0
    k = a_shape[-2] if trans_a and len(a_shape) >= 2 else a_shape[-1]
    return _size(out_shape) * (k or 0)


def einsum_macs(equation: str, shapes: list[Shape | None]) -> int:
    """Product of the sizes of every distinct subscript letter (ellipses count as their dims)."""
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs, shapes):
        if not _known(shape):
            return 0
        letters = re.findall(r"\.\.\.|[A-Za-z]", term)
        ellipsis = len(shape) - (len(letters) - letters.count("..."))  # type: ignore[arg-type]
        position = 0
        for letter in letters:
            if letter == "...":
                for k in range(ellipsis):
                    sizes[f"...{k}"] = max(sizes.get(f"...{k}", 1), shape[position + k])  # type: ignore[index]
                position += ellipsis
            else:
                sizes[letter] = shape[position]  # type: ignore[index]
                position += 1
    return math.prod(sizes.values())


def reads_weight(name: str, weights: set[str], producers: Mapping[str, tuple[str, list[str]]]) -> bool:
    """Whether ``name`` is a weight, possibly behind Cast/DequantizeLinear/Transpose/Reshape."""
    for _ in range(8):
        if name in weights:
            return True
        producer = producers.get(name)
        if producer is None or producer[0] not in _WEIGHT_PATH_OPS or not producer[1]:
            return False
        name = producer[1][0]
    return False


def node_work(op_type: str, attrs: Mapping, inputs: list[str], outputs: list[str],
              shapes: Mapping[str, Shape], itemsizes: Mapping[str, int], weights: set[str],
              producers: Mapping[str, tuple[str, list[str]]]) -> Work:
    """MACs and kind, or the activation bytes of a memory-bound op, for one standard ONNX node."""
    def shape(i: int) -> Shape | None:
        return shapes.get(inputs[i]) if i < len(inputs) and inputs[i] else None

    out = shapes.get(outputs[0]) if outputs and outputs[0] else None
    if op_type in _CONV_OPS:
        _, w = _CONV_OPS[op_type]
        if _known(out) and _known(shape(w)):
            return Work(CONV, conv_macs(out, shape(w)), 0)  # type: ignore[arg-type]
    if op_type == "ConvTranspose" and _known(shape(0)) and _known(shape(1)):
        return Work(CONV, conv_transpose_macs(shape(0), shape(1)), 0)  # type: ignore[arg-type]
    if op_type in _MATMUL_OPS:
        a, b = _MATMUL_OPS[op_type]
        trans_a = bool(attrs.get("transA", 0)) if op_type == "Gemm" else False
        if _known(out) and _known(shape(a)):
            weighted = any(reads_weight(inputs[i], weights, producers) for i in (a, b) if i < len(inputs))
            return Work(MATMUL if weighted else ATTENTION, matmul_macs(shape(a), out, trans_a), 0)  # type: ignore[arg-type]
    if op_type == "Einsum":
        macs = einsum_macs(str(attrs.get("equation", "")), [shapes.get(i) for i in inputs])
        weighted = any(reads_weight(i, weights, producers) for i in inputs)
        return Work(MATMUL if weighted else ATTENTION, macs, 0)
    if op_type in _NO_DATA:
        return Work(None, 0, 0)
    touched = [n for n in inputs if n and n not in weights] + [n for n in outputs if n]
    moved = sum(_size(shapes.get(n)) * itemsizes.get(n, 4) for n in touched)
    return Work(None, 0, round(moved * PASSES.get(op_type, 1.0)))
