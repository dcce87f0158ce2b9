"""Ops that pick entries by value: TopK, NonZero, OneHot and Hardmax.

Detection and classification heads use them (TopK over scores, NonZero over a mask, OneHot and
Hardmax over class axes); no frame model does, so they load only when a graph has one. TopK keeps
the lower index among equal values; NonZero and TopK return int64 indices.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, register


@register("TopK", 11, cost=OUTPUT_ONLY)
def top_k(x: np.ndarray, k: np.ndarray, /, *, axis: int = -1, largest: int = 1,
          sorted: int = 1) -> tuple[np.ndarray, np.ndarray]:  # noqa: A002 (ONNX attribute name)
    """Values and int64 indices of the k largest (or smallest) entries; ties keep the lower index."""
    count = int(np.asarray(k).reshape(-1)[0])
    axis = axis % x.ndim
    if largest:  # descending values, ties by ascending index, for every dtype (no negation overflow)
        length = x.shape[axis]
        order = length - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(count), axis=axis).astype(np.int64)
    return np.take_along_axis(x, indices, axis=axis), indices


@register("NonZero", 9, cost=OUTPUT_ONLY)
def nonzero(x: np.ndarray) -> np.ndarray:
    return np.array(np.nonzero(np.atleast_1d(x)), dtype=np.int64).reshape(max(x.ndim, 1), -1)


@register("OneHot", 11, cost=OUTPUT_ONLY)
def one_hot(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, axis: int = -1) -> np.ndarray:
    depth = int(np.asarray(depth).reshape(-1)[0])
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    axis = axis % (indices.ndim + 1)
    classes = np.arange(depth).reshape([-1] + [1] * (indices.ndim - axis))
    hot = np.expand_dims(idx, axis) == classes
    return np.where(hot, values[1], values[0]).astype(values.dtype)


@register("Hardmax", 13, cost=OUTPUT_ONLY)
def hardmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """One-hot of the first maximum along ``axis``."""
    axis = axis % x.ndim
    first = np.expand_dims(np.argmax(x, axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, first, 1, axis=axis)
    return out
