"""What an engine step computes, as a key: the op, its operand shapes, attributes and weight storage.

Steps with the same signature take the same time, so the throughput probes
(``frame.estimate.probes``) measure a model's heaviest signatures with their real shapes instead of
guessing from one generic GEMM: on this machine a 3×3 conv runs at 12 to 45 G multiply-adds per
CPU second depending on its channels and pixels. ``step_signature`` reads the step as the engine
planned it (``Conv``, the fused ``ConvAffine``/``UpsampleConv``/``SlicedAttention``, ``MatMul``/
``Gemm`` on a weight, and ``DecodedWeight`` around any of them for fp16 or 8-bit weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from frame.engine import graph as g
from frame.estimate.shapes import ShapeTable

_CONV_KEYS = ("pads", "strides", "dilations", "group")


@dataclass(frozen=True)
class Signature:
    """``op``: conv, upsample_conv, matmul or attention; ``shapes``: (x, w) or (q, kᵀ, v)."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    attrs: tuple[tuple[str, object], ...] = ()
    storage: str = "fp32"  # how the weight is stored: fp32, fp16 or uint8

    @property
    def kind(self) -> str:
        return {"conv": "conv", "upsample_conv": "conv", "matmul": "matmul"}.get(self.op, "attention")

    def attr(self, name: str, default: object = None) -> object:
        return dict(self.attrs).get(name, default)


def storage_of(ref) -> str:  # noqa: ANN001 - a WeightRef
    if ref is None:
        return "fp32"
    if ref.dtype in (np.dtype(np.uint8), np.dtype(np.int8)):
        return "uint8"
    return "fp16" if ref.dtype == np.float16 else "fp32"


def _conv_attrs(attrs: Mapping) -> tuple[tuple[str, object], ...]:
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(attrs.items()) if k in _CONV_KEYS)


def _wrapped(node: g.Node) -> tuple[str, Mapping]:
    kernel = node.spec.fn.keywords.get("_kernel") if node.spec is not None else None
    func = getattr(kernel, "func", kernel)
    return getattr(func, "__name__", ""), getattr(kernel, "keywords", {}) or {}


def _upsample_conv_attrs(node: g.Node) -> Mapping:
    conv = node.spec.fn.keywords.get("_conv") if node.spec is not None else None
    return getattr(conv, "keywords", {}) or {}


def _shape(table: ShapeTable, name: str) -> tuple[int, ...] | None:
    shape = table.shapes.get(name) if name else None
    if shape is None or any(d is None for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def step_signature(step: g.Step, table: ShapeTable, weights: Mapping) -> Signature | None:
    """The signature of a compute-heavy step, or None for memory-bound ones."""
    node = step.node
    op, attrs = node.op_type, node.attrs
    storage = "fp32"
    if op == "DecodedWeight":
        name, attrs = _wrapped(node)
        storage = storage_of(weights.get(node.inputs[1]))
        op = {"conv": "Conv", "upsample_conv": "UpsampleConv", "matmul": "MatMul", "gemm": "Gemm"}.get(name, "")
    elif len(node.inputs) > 1 and node.inputs[1] in weights:
        storage = storage_of(weights[node.inputs[1]])
    if op == "ConvAffine" and not attrs.get("transpose"):
        op, attrs = "Conv", attrs.get("conv_attrs", {})
    if op == "UpsampleConv" and node.op_type == "UpsampleConv":
        attrs = _upsample_conv_attrs(node)
    shapes = [_shape(table, name) for name in node.inputs[:3]]
    if op in ("Conv", "UpsampleConv") and shapes[0] and shapes[1] and len(shapes[0]) == 4 and len(shapes[1]) == 4:
        return Signature("conv" if op == "Conv" else "upsample_conv", (shapes[0], shapes[1]), _conv_attrs(attrs),
                         storage)
    if op in ("MatMul", "Gemm") and shapes[0] and shapes[1] and node.inputs[1] in weights:
        w = shapes[1]
        if op == "Gemm" and attrs.get("transB", 0):
            w = tuple(reversed(w))
        return Signature("matmul", (shapes[0], w), (), storage)
    if op == "SlicedAttention" and all(shapes):
        return Signature("attention", tuple(shapes), (("score_ops", tuple(attrs.get("score_ops", ()))),))  # type: ignore[arg-type]
    if op == "MatMul" and shapes[0] and shapes[1]:
        return Signature("activation_matmul", (shapes[0], shapes[1]))
    return None
