"""MatMul and Gemm on BLAS through numpy, computing in float32.

Dtypes: float16 operands are widened to float32 for the product (numpy's float16 matmul has no BLAS
path and accumulates badly). The result is float16 only when every float operand was float16, so an
fp16 *weight* handed to an fp32 graph by the runtime gives the fp32 result the graph expects.
Integer MatMul stays integer (numpy semantics, int64 accumulation).
"""

from __future__ import annotations

import math
import re

import numpy as np

from frame.engine import buffers
from frame.engine.ops.blocks import matmul_into
from frame.engine.ops.cost import Cost, CostQuery, Work, known, size
from frame.engine.ops.registry import register

__all__ = ["float32_operands", "matmul"]


def float32_operands(*arrays: np.ndarray | None) -> tuple[list, np.dtype]:
    """Widen float16 arrays to float32; also return the dtype the op's result must have."""
    floats = [a for a in arrays if a is not None and a.dtype.kind == "f"]
    if not floats:
        return list(arrays), np.result_type(*[a for a in arrays if a is not None])
    all_half = all(a.dtype == np.float16 for a in floats)
    out_dtype = np.dtype(np.float16) if all_half else np.result_type(*floats)
    widened = [a.astype(np.float32) if a is not None and a.dtype == np.float16 else a for a in arrays]
    return widened, out_dtype


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``; a stack of matrices times one matrix becomes a single large GEMM, and float32
    products of matrices go through ``blocks.matmul_into`` (split over the cores when big)."""
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and a.dtype == b.dtype:
        out = buffers.empty((*a.shape[:-1], b.shape[-1]), a.dtype)
        matmul_into(a.reshape(-1, a.shape[-1]), b, out.reshape(-1, b.shape[-1]))
        return out  # owns its buffer, so the runtime may later reuse it in place
    if a.ndim >= 2 and b.ndim >= 2 and a.dtype == b.dtype == np.float32 and max(a.ndim, b.ndim) <= 3:
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = buffers.empty((*lead, a.shape[-2], b.shape[-1]), np.float32)
        return matmul_into(a, b, out)
    return np.asarray(np.matmul(a, b))


def matmul_work(query: CostQuery, a: int = 0, b: int = 1) -> Work | None:
    """``prod(out) × K`` multiply-adds (K: A's last dim, its first with Gemm's ``transA``); ``matmul``
    when A or B reads a weight, ``attention`` for two activations."""
    a_shape, out = query.shape(a), query.out()
    if not (known(out) and known(a_shape)):
        return None
    if not a_shape:
        return Work(query.kind_of(a, b), 0)
    trans_a = bool(query.attrs.get("transA", 0)) and len(a_shape) >= 2  # type: ignore[arg-type]
    k = a_shape[-2] if trans_a else a_shape[-1]  # type: ignore[index]
    return Work(query.kind_of(a, b), size(out) * (k or 0))


def einsum_work(query: CostQuery) -> Work:
    """The product of the sizes of every distinct subscript letter (ellipses count as their dims)."""
    shapes = [query.shapes.get(name) for name in query.inputs]
    return Work(query.kind_of(*range(len(query.inputs))), _einsum_macs(str(query.attrs.get("equation", "")), shapes))


def _einsum_macs(equation: str, shapes: list) -> int:
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs, shapes):
        if not known(shape):
            return 0
        letters = re.findall(r"\.\.\.|[A-Za-z]", term)
        ellipsis = len(shape) - (len(letters) - letters.count("..."))
        position = 0
        for letter in letters:
            if letter == "...":
                for k in range(ellipsis):
                    sizes[f"...{k}"] = max(sizes.get(f"...{k}", 1), shape[position + k])
                position += ellipsis
            else:
                sizes[letter] = shape[position]
                position += 1
    return math.prod(sizes.values())


MATMUL_COST = Cost(work=matmul_work)


@register("MatMul", 1, cost=MATMUL_COST)
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy-style batched matmul with broadcasting of the leading dimensions, 1-D operands allowed."""
    (a32, b32), dtype = float32_operands(a, b)
    return _matmul(a32, b32).astype(dtype, copy=False)


@register("Gemm", 7, cost=MATMUL_COST)
def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, /, *, alpha: float = 1.0,
         beta: float = 1.0, transA: int = 0, transB: int = 0) -> np.ndarray:  # noqa: N803 (ONNX names)
    """Y = alpha * A' @ B' + beta * C with C broadcast to (M, N); transposes are free views."""
    (a32, b32, c32), dtype = float32_operands(a, b, c)
    a32 = a32.T if transA else a32
    b32 = b32.T if transB else b32
    if a32.ndim != 2 or b32.ndim != 2:
        raise ValueError(f"Gemm needs 2-D A and B, got {a.shape} and {b.shape}")
    if a32.dtype == b32.dtype == np.float32:
        result = matmul_into(a32, b32, buffers.empty((a32.shape[0], b32.shape[1]), np.float32))
    else:
        result = a32 @ b32
    if alpha != 1.0:
        result *= np.float32(alpha)
    if c32 is not None and beta != 0.0:
        result += c32 if beta == 1.0 else np.float32(beta) * c32
    return result.astype(dtype, copy=False)


@register("Einsum", 12, cost=Cost(work=einsum_work))
def einsum(*inputs: np.ndarray, equation: str | None = None) -> np.ndarray:
    """numpy's einsum with contraction-order optimisation (it dispatches to BLAS where it can)."""
    if equation is None:
        raise ValueError("Einsum needs the 'equation' attribute")
    operands, dtype = float32_operands(*inputs)
    return np.asarray(np.einsum(equation.replace(" ", ""), *operands, optimize=True)).astype(dtype, copy=False)
