"""Gather and scatter kernels: take values by index, write values at indices.

ONNX indices may be negative (counted from the end of the axis); they are checked against the axis
length so that a bad index raises a clear error instead of numpy wrapping it silently twice.
Outputs keep the data dtype; scatters copy ``data`` first (their input is never modified).
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.elementwise import as_array
from frame.engine.ops.registry import OUTPUT_ONLY, VIEW, UnsupportedOp, register


def _checked(indices: np.ndarray, length: int, what: str) -> np.ndarray:
    """Indices as int64 with negatives resolved; out-of-range values raise."""
    indices = indices.astype(np.int64, copy=False)
    if indices.size and (indices.min() < -length or indices.max() >= length):
        bad = indices[(indices < -length) | (indices >= length)].reshape(-1)[0]
        raise IndexError(f"{what}: index {bad} is out of range for an axis of size {length}")
    return np.where(indices < 0, indices + length, indices)


@register("Gather", 1, cost=VIEW)
def gather(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    axis = axis % data.ndim
    return as_array(np.take(data, _checked(indices, data.shape[axis], "Gather"), axis=axis))


@register("GatherElements", 11, cost=OUTPUT_ONLY)
def gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    axis = axis % data.ndim
    return np.take_along_axis(data, _checked(indices, data.shape[axis], "GatherElements"), axis=axis)


def _nd_index(data_shape: tuple[int, ...], indices: np.ndarray, batch_dims: int) -> tuple:
    """Advanced-index tuple selecting ``indices[..., :k]`` within each batch of the leading dims."""
    depth = indices.shape[-1]
    index_shape = indices.shape[:-1]
    batch = []
    for b in range(batch_dims):
        shape = [1] * len(index_shape)
        shape[b] = index_shape[b]
        batch.append(np.arange(index_shape[b]).reshape(shape))
    rest = [_checked(indices[..., i], data_shape[batch_dims + i], "GatherND/ScatterND")
            for i in range(depth)]
    return tuple(batch + rest)


@register("GatherND", 11, cost=OUTPUT_ONLY)
def gather_nd(data: np.ndarray, indices: np.ndarray, batch_dims: int = 0) -> np.ndarray:
    return data[_nd_index(data.shape, indices, batch_dims)]


_REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _validate_reduction(attrs: dict) -> None:
    if attrs.get("reduction", "none") not in _REDUCTIONS:
        raise UnsupportedOp(f"attribute 'reduction' = {attrs['reduction']!r} "
                            f"(expected one of {', '.join(_REDUCTIONS)})")


def _scatter(data: np.ndarray, index: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    out = data.copy()
    ufunc = _REDUCTIONS[reduction]
    if ufunc is None:
        out[index] = updates
    else:
        ufunc.at(out, index, updates)
    return out


@register("ScatterND", 11, validate=_validate_reduction, cost=OUTPUT_ONLY)
def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str = "none") -> np.ndarray:
    """``reduction`` (opset 16/18) combines duplicates; with 'none' duplicates are undefined in ONNX."""
    return _scatter(data, _nd_index(data.shape, indices, 0), updates, reduction)


@register("ScatterElements", 11, validate=_validate_reduction, cost=OUTPUT_ONLY)
def scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int = 0,
                     reduction: str = "none") -> np.ndarray:
    axis = axis % data.ndim
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = _checked(indices, data.shape[axis], "ScatterElements")
    return _scatter(data, tuple(grid), updates, reduction)


@register("CumSum", 11, cost=OUTPUT_ONLY)
def cumsum(x: np.ndarray, axis: np.ndarray, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    axis = int(axis) % x.ndim
    data = np.flip(x, axis) if reverse else x
    result = np.cumsum(data, axis=axis, dtype=x.dtype)
    if exclusive:
        result = np.roll(result, 1, axis=axis)
        result[(slice(None),) * axis + (0,)] = 0
    return np.flip(result, axis) if reverse else result
