"""Kernels that make tensors or change their dtype: Cast, CastLike, Constant, ConstantOfShape, Range.

ONNX element types are mapped with a small explicit table (no onnx import on the hot path); types
numpy cannot represent (bfloat16, float8, int4, string) are rejected at load time by ``validate``.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, VIEW, UnsupportedOp, register

__all__ = ["ONNX_TO_NUMPY"]

# onnx.TensorProto.DataType values -> numpy dtypes.
ONNX_TO_NUMPY: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
}


def _validate_cast(attrs: dict) -> None:
    to = attrs.get("to")
    if to is None:
        raise UnsupportedOp("Cast needs the attribute 'to'")
    if to not in ONNX_TO_NUMPY:
        raise UnsupportedOp(f"Cast attribute 'to' = {to} is an element type this engine does not support")


def _cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float -> int truncates toward zero (numpy and ONNX agree); no copy when already right."""
    if x.dtype == dtype:
        return x
    if dtype == np.bool_:
        return x != 0
    return x.astype(dtype)


@register("Cast", 6, validate=_validate_cast, cost=OUTPUT_ONLY)
def cast(x: np.ndarray, to: int | None = None, saturate: int = 1) -> np.ndarray:
    """``saturate`` (opset 19) only matters for float8 targets, which ``validate`` rejects."""
    return _cast(x, ONNX_TO_NUMPY[to])


@register("CastLike", 15, cost=OUTPUT_ONLY)
def cast_like(x: np.ndarray, target_type: np.ndarray, saturate: int = 1) -> np.ndarray:
    return _cast(x, target_type.dtype)


_CONSTANT_KINDS = ("value", "value_float", "value_floats", "value_int", "value_ints")


def _validate_constant(attrs: dict) -> None:
    given = [k for k in attrs if attrs[k] is not None]
    for name in ("value_string", "value_strings"):
        if name in given:
            raise UnsupportedOp(f"Constant attribute {name!r}: string tensors are not supported")
    if len(given) != 1 or given[0] not in _CONSTANT_KINDS:
        raise UnsupportedOp(f"Constant needs exactly one of {', '.join(_CONSTANT_KINDS)}, got {given}")


@register("Constant", 1, validate=_validate_constant, cost=VIEW)
def constant(value: np.ndarray | None = None, value_float: float | None = None,
             value_floats: list[float] | None = None, value_int: int | None = None,
             value_ints: list[int] | None = None, value_string: str | None = None,
             value_strings: list[str] | None = None, sparse_value: object = None) -> np.ndarray:
    """String and sparse values are refused at load time (by ``validate`` / ``decode_attributes``)."""
    if value is not None:
        return value
    if value_float is not None:
        return np.array(value_float, dtype=np.float32)
    if value_floats is not None:
        return np.array(value_floats, dtype=np.float32)
    if value_int is not None:
        return np.array(value_int, dtype=np.int64)
    if value_ints is not None:
        return np.array(value_ints, dtype=np.int64)
    raise ValueError("Constant has no value attribute")


@register("ConstantOfShape", 9, cost=VIEW)
def constant_of_shape(shape: np.ndarray, value: np.ndarray | None = None) -> np.ndarray:
    """Default fill is float32 zero, per the spec; ``value`` is a one-element tensor."""
    fill = np.zeros(1, np.float32) if value is None else value.reshape(-1)
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    return np.full(dims, fill[0], dtype=fill.dtype)


@register("Range", 11, cost=VIEW)
def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Element count max(ceil((limit - start) / delta), 0), in ``start``'s dtype."""
    dtype = start.dtype
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    return (start + np.arange(count, dtype=dtype) * delta).astype(dtype, copy=False)


@register("EyeLike", 9, cost=OUTPUT_ONLY)
def eye_like(x: np.ndarray, dtype: int | None = None, k: int = 0) -> np.ndarray:
    """A 2-D identity (shifted by ``k``) with x's shape, in ``dtype`` or x's type."""
    target = ONNX_TO_NUMPY[dtype] if dtype is not None else x.dtype
    return np.eye(x.shape[0], x.shape[1], k=k, dtype=target)
