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
from frame.engine.counted_shapes import ShapeTable

_CONV_KEYS = ("pads", "strides", "dilations", "group")
KIND_OF = {"conv": "conv", "upsample_conv": "conv", "norm_conv": "conv", "matmul": "matmul", "geglu": "matmul"}


@dataclass(frozen=True)
class Signature:
    """``op``: conv, upsample_conv, norm_conv (GroupNorm [+ SiLU] fused into the conv), matmul, geglu
    (the fused feed-forward), attention or activation_matmul; ``shapes``: (x, w), (x, w1, w2) for
    geglu, or (q, kᵀ, v)."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    attrs: tuple[tuple[str, object], ...] = ()
    storage: str = "fp32"  # how the weight is stored: fp32, fp16 or uint8

    @property
    def kind(self) -> str:
        return KIND_OF.get(self.op, "attention")

    @property
    def fuses_elementwise(self) -> bool:
        """Whether the step runs memory-bound work of the graph inside its kernel that its probe runs
        too (the softmax of attention, the GroupNorm and SiLU of a NormConv, the GELU of a GEGLU): a
        probed rate then already includes that traffic."""
        return self.op in ("attention", "norm_conv", "geglu")

    def attr(self, name: str, default: object = None) -> object:
        return dict(self.attrs).get(name, default)


def storage_of(ref) -> str:  # noqa: ANN001 - a WeightRef
    if ref is None:
        return "fp32"
    if ref.dtype in (np.dtype(np.uint8), np.dtype(np.int8)):
        return "uint8"
    return "fp16" if ref.dtype == np.float16 else "fp32"


def _conv_attrs(attrs: Mapping) -> tuple[tuple[str, object], ...]:
    keys = (*_CONV_KEYS, "act")
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(attrs.items()) if k in keys)


def _wrapped(node: g.Node) -> tuple[str, Mapping]:
    kernel = node.spec.keywords.get("_kernel") if node.spec is not None else None
    func = getattr(kernel, "func", kernel)
    return getattr(func, "__name__", ""), getattr(kernel, "keywords", {}) or {}


def _conv_keywords(keywords: Mapping, name: str) -> Mapping:
    """The attributes bound to a fused kernel's inner conv (``_conv`` of UpsampleConv, ``_attrs`` of
    NormConv)."""
    inner = keywords.get(name)
    if isinstance(inner, Mapping):
        return inner
    return getattr(inner, "keywords", {}) or {}


def _fused_conv(op: str, keywords: Mapping) -> tuple[str, Mapping]:
    """(signature op, conv attributes) of a fused conv kernel's keywords."""
    if op == "UpsampleConv":
        return "upsample_conv", _conv_keywords(keywords, "_conv")
    attrs = dict(_conv_keywords(keywords, "_attrs"))
    attrs["act"] = bool(keywords.get("_act"))
    return "norm_conv", attrs


def _shape(table: ShapeTable, name: str) -> tuple[int, ...] | None:
    shape = table.shapes.get(name) if name else None
    if shape is None or any(d is None for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


_WRAPPED = {"conv": "Conv", "upsample_conv": "UpsampleConv", "norm_conv": "NormConv", "matmul": "MatMul",
            "gemm": "Gemm"}


def step_signature(step: g.Step, table: ShapeTable, weights: Mapping, one_thread: bool = False
                   ) -> Signature | None:
    """The signature of a compute-heavy step, or None for memory-bound ones. ``one_thread``: the step
    runs with BLAS held on one thread by an earlier step (``frame.engine.plan_costs._inherits_one_thread``): its
    probe must run it so too (GegluFF at two BLAS threads took twice the CPU time)."""
    node = step.node
    op, attrs = node.op_type, node.attrs
    storage = "fp32"
    if op == "DecodedWeight":
        name, attrs = _wrapped(node)
        storage = storage_of(weights.get(node.inputs[1]))
        op = _WRAPPED.get(name, "")
    elif len(node.inputs) > 1 and node.inputs[1] in weights:
        storage = storage_of(weights[node.inputs[1]])
    if op == "ConvAffine" and not attrs.get("transpose"):
        op, attrs = "Conv", attrs.get("conv_attrs", {})
    conv_op = "conv"
    if op in ("UpsampleConv", "NormConv"):  # attributes bound to the kernel, whether wrapped or not
        conv_op, attrs = _fused_conv(op, attrs if node.op_type == "DecodedWeight" else node.spec.keywords)
    if op == "GegluFF":
        return _geglu_signature(node, table, weights, one_thread)
    shapes = [_shape(table, name) for name in node.inputs[:3]]
    if op in ("Conv", "UpsampleConv", "NormConv") and shapes[0] and shapes[1] and len(shapes[0]) == 4 \
            and len(shapes[1]) == 4:
        return Signature(conv_op, (shapes[0], shapes[1]), _conv_attrs(attrs), storage)
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


def _geglu_signature(node: g.Node, table: ShapeTable, weights: Mapping, one_thread: bool) -> Signature | None:
    """GegluFF's inputs: x, then the stored W1 and W2 at 1 and 5 (scale and zero point beside each), in
    the signature as MatMul reads them, (C × 2I) and (I × C): a Gemm's transposed (out, in) weights
    (``frame.convert.graphs``, the kernel's ``_transposed``) are turned round, so the probe multiplies
    the model's shapes (it made x 2I wide for them)."""
    x = _shape(table, node.inputs[0])
    w1, w2 = (weights.get(node.inputs[k]) for k in (1, 5))
    if x is None or w1 is None or w2 is None:
        return None
    transposed = node.spec.keywords.get("_transposed", (False, False)) if node.spec is not None else (False, False)
    shapes = [tuple(int(d) for d in w.shape) for w in (w1, w2)]
    shapes = [tuple(reversed(shape)) if flip else shape for shape, flip in zip(shapes, transposed)]
    return Signature("geglu", (x, *shapes), (("blas_one_thread", one_thread),), storage_of(w1))
