"""Elementwise kernels: unary maths, binary arithmetic with broadcasting, comparisons and logic.

Dtype rule for the whole family (kept in ``_binary`` / ``unary_ufunc``): results have the dtype ONNX
specifies for the inputs (float16 in, float16 out; numpy's float16 ufuncs compute each element in
float32 and round once, as onnxruntime does). Mixed float16/float32 operands, which only arise when
the runtime hands an fp16 weight to an fp32 graph, follow numpy promotion to float32.

Kernels registered ``inplace=True`` write into input 0 when the runtime passes ``_reuse=True`` and the
result has input 0's shape and dtype, which saves one activation-sized allocation per op in the UNet.
"""

from __future__ import annotations

import numpy as np

from frame.engine import buffers
from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, register


def as_array(value: object) -> np.ndarray:
    """ufuncs on 0-d arrays return numpy scalars; kernels must return arrays."""
    return value if isinstance(value, np.ndarray) else np.asarray(value)


def can_reuse(a: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether a kernel may write its ``shape``/``dtype`` result into ``a`` (an input the executor says
    dies here): same shape and dtype, writeable, not 0-d."""
    return a.shape == shape and a.dtype == dtype and a.flags.writeable and a.ndim > 0


def _binary(ufunc: np.ufunc, a: np.ndarray, b: np.ndarray, reuse: bool) -> np.ndarray:
    """Apply ``ufunc`` with numpy broadcasting (= ONNX multidirectional broadcasting)."""
    if a.dtype.kind == b.dtype.kind == "f" and a.ndim and b.ndim:
        shape, dtype = np.broadcast_shapes(a.shape, b.shape), np.result_type(a, b)
        if reuse and can_reuse(a, shape, dtype):
            return ufunc(a, b, out=a)
        return ufunc(a, b, out=buffers.empty(shape, dtype))  # a reused buffer (frame.engine.buffers)
    if reuse:
        dtype = np.result_type(a, b)
        if can_reuse(a, np.broadcast_shapes(a.shape, b.shape), dtype):
            return ufunc(a, b, out=a)
    return as_array(ufunc(a, b))


def unary_ufunc(ufunc: np.ufunc, x: np.ndarray, reuse: bool) -> np.ndarray:
    """``ufunc(x)``, in place when ``reuse`` allows (the unary kernels of ``unary.py`` share it)."""
    if reuse and can_reuse(x, x.shape, x.dtype):
        return ufunc(x, out=x)
    return as_array(ufunc(x))


def _arithmetic(name: str, ufunc: np.ufunc) -> None:
    @register(name, 7, inplace=True, cost=OUTPUT_ONLY)
    def kernel(a: np.ndarray, b: np.ndarray, _reuse: bool = False) -> np.ndarray:
        return _binary(ufunc, a, b, _reuse)

    kernel.__name__ = kernel.__qualname__ = name.lower()


for _name, _ufunc in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply)):
    _arithmetic(_name, _ufunc)


@register("Div", 7, inplace=True, cost=OUTPUT_ONLY)
def div(a: np.ndarray, b: np.ndarray, _reuse: bool = False) -> np.ndarray:
    """Integer division truncates toward zero in ONNX (C semantics), unlike numpy's floor division."""
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        quotient = np.abs(a) // np.abs(b)
        return as_array(np.where((a < 0) ^ (b < 0), -quotient, quotient).astype(np.result_type(a, b)))
    return _binary(np.true_divide, a, b, _reuse)


@register("Mod", 10, cost=OUTPUT_ONLY)
def mod(a: np.ndarray, b: np.ndarray, fmod: int = 0) -> np.ndarray:
    """``fmod=0`` takes the divisor's sign (Python ``%``); ``fmod=1`` the dividend's (C ``fmod``)."""
    return as_array(np.fmod(a, b) if fmod else np.mod(a, b))


@register("Pow", 7, inplace=True, cost=OUTPUT_ONLY)
def pow_(a: np.ndarray, b: np.ndarray, _reuse: bool = False) -> np.ndarray:
    """The result has the base's dtype (opset 12+ lets the exponent have another type)."""
    if a.dtype.kind == "f":
        if b.ndim == 0 and b == 2:
            return _binary(np.multiply, a, a, _reuse)
        if b.ndim == 0 and b == 0.5:
            return unary_ufunc(np.sqrt, a, _reuse)
        return _binary(np.power, a, b.astype(a.dtype, copy=False), _reuse)
    return as_array(np.power(a, b.astype(np.int64, copy=False)).astype(a.dtype, copy=False))


@register("PRelu", 9, cost=OUTPUT_ONLY)
def prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return as_array(np.where(x < 0, x * slope, x).astype(x.dtype, copy=False))


def _variadic(name: str, ufunc: np.ufunc, mean: bool = False) -> None:
    @register(name, 8, cost=OUTPUT_ONLY)
    def kernel(*inputs: np.ndarray) -> np.ndarray:
        result = inputs[0]
        for operand in inputs[1:]:
            result = ufunc(result, operand)
        if mean:
            result = result / np.asarray(len(inputs), dtype=result.dtype)
        return as_array(np.array(result, copy=True) if result is inputs[0] else result)

    kernel.__name__ = kernel.__qualname__ = name.lower()


_variadic("Max", np.maximum)
_variadic("Min", np.minimum)
_variadic("Sum", np.add)
_variadic("Mean", np.add, mean=True)


def _compare(name: str, ufunc: np.ufunc, since: int) -> None:
    @register(name, since, cost=OUTPUT_ONLY)
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return as_array(ufunc(a, b))

    kernel.__name__ = kernel.__qualname__ = name.lower()


for _name, _ufunc, _since in (
    ("Equal", np.equal, 7), ("Less", np.less, 7), ("Greater", np.greater, 7),
    ("LessOrEqual", np.less_equal, 12), ("GreaterOrEqual", np.greater_equal, 12),
    ("And", np.logical_and, 7), ("Or", np.logical_or, 7), ("Xor", np.logical_xor, 7),
    ("BitwiseAnd", np.bitwise_and, 18), ("BitwiseOr", np.bitwise_or, 18), ("BitwiseXor", np.bitwise_xor, 18),
):
    _compare(_name, _ufunc, _since)


@register("Where", 9, cost=OUTPUT_ONLY)
def where(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return as_array(np.where(condition, x, y))


def _validate_bit_shift(attrs: dict) -> None:
    if attrs.get("direction") not in ("LEFT", "RIGHT"):
        raise UnsupportedOp(f"BitShift attribute 'direction' = {attrs.get('direction')!r} (expected LEFT or RIGHT)")


@register("BitShift", 11, validate=_validate_bit_shift, cost=OUTPUT_ONLY)
def bit_shift(x: np.ndarray, y: np.ndarray, direction: str | None = None) -> np.ndarray:
    shift = np.left_shift if direction == "LEFT" else np.right_shift
    return as_array(shift(x, y.astype(x.dtype)))
