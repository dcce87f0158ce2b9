"""Reductions (ReduceMean, ReduceSum, ... over any set of axes) and ArgMax/ArgMin.

Opset variants: ``axes`` is an attribute up to opset 17 (ReduceSum: 12) and an optional input after,
together with ``noop_with_empty_axes``. float16 inputs accumulate in float32 and are cast back;
integer inputs keep their dtype.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, register
from frame.engine.ops.shape import normalize_axes

# name -> (function of (x, axes, keepdims) on float32/int data)
_REDUCERS = {
    "ReduceSum": lambda x, ax, kd: np.sum(x, axis=ax, keepdims=kd),
    "ReduceMean": lambda x, ax, kd: np.mean(x, axis=ax, keepdims=kd),
    "ReduceMax": lambda x, ax, kd: np.max(x, axis=ax, keepdims=kd, initial=_extreme(x.dtype, low=True)),
    "ReduceMin": lambda x, ax, kd: np.min(x, axis=ax, keepdims=kd, initial=_extreme(x.dtype, low=False)),
    "ReduceProd": lambda x, ax, kd: np.prod(x, axis=ax, keepdims=kd),
    "ReduceL1": lambda x, ax, kd: np.sum(np.abs(x), axis=ax, keepdims=kd),
    "ReduceL2": lambda x, ax, kd: np.sqrt(np.sum(np.square(x), axis=ax, keepdims=kd)),
    "ReduceSumSquare": lambda x, ax, kd: np.sum(np.square(x), axis=ax, keepdims=kd),
    "ReduceLogSum": lambda x, ax, kd: np.log(np.sum(x, axis=ax, keepdims=kd)),
    "ReduceLogSumExp": lambda x, ax, kd: _log_sum_exp(x, ax, kd),
}

# First opset where ``axes`` became an input.
_AXES_INPUT_SINCE = {name: 18 for name in _REDUCERS} | {"ReduceSum": 13}


def _extreme(dtype: np.dtype, low: bool) -> object:
    """The identity of max (low=True) or min: what reducing an empty set gives, as in the ONNX spec."""
    if dtype == np.bool_:
        return not low
    if dtype.kind == "f":
        return -np.inf if low else np.inf
    info = np.iinfo(dtype)
    return info.min if low else info.max


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    peak = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, 0)
    total = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
    return total if keepdims else np.squeeze(total, axis=axes)


def _reduce(name: str, data: np.ndarray, axes: object, keepdims: int, noop_with_empty_axes: int) -> np.ndarray:
    if axes is None or np.asarray(axes).size == 0:
        # noop: no reduction, but the elementwise part (square, log, ...) still applies.
        axes_tuple = () if noop_with_empty_axes else tuple(range(data.ndim))
    else:
        axes_tuple = normalize_axes(axes, data.ndim)
    work = data.astype(np.float32) if data.dtype == np.float16 else data
    result = _REDUCERS[name](work, axes_tuple, bool(keepdims))
    return np.asarray(result).astype(data.dtype, copy=False)


def _register_reduce(name: str) -> None:
    @register(name, 1, cost=OUTPUT_ONLY)
    def reduce_attr(data: np.ndarray, axes: list[int] | None = None, keepdims: int = 1) -> np.ndarray:
        return _reduce(name, data, axes, keepdims, 0)

    @register(name, _AXES_INPUT_SINCE[name], cost=OUTPUT_ONLY)
    def reduce_input(data: np.ndarray, axes: np.ndarray | None = None, /, *, keepdims: int = 1,
                     noop_with_empty_axes: int = 0) -> np.ndarray:
        return _reduce(name, data, axes, keepdims, noop_with_empty_axes)

    reduce_attr.__name__ = reduce_attr.__qualname__ = f"{name.lower()}_axes_attribute"
    reduce_input.__name__ = reduce_input.__qualname__ = f"{name.lower()}_axes_input"


for _name in _REDUCERS:
    _register_reduce(_name)


def _arg(fn, data: np.ndarray, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    """Index of the first (or with ``select_last_index`` the last) extreme value along ``axis``."""
    axis = axis % data.ndim
    if select_last_index:
        flipped = np.flip(data, axis)
        index = data.shape[axis] - 1 - fn(flipped, axis=axis)
    else:
        index = fn(data, axis=axis)
    index = np.asarray(index, dtype=np.int64)
    return np.expand_dims(index, axis) if keepdims else index


@register("ArgMax", 1, cost=OUTPUT_ONLY)
def arg_max(data: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    return _arg(np.argmax, data, axis, keepdims, select_last_index)


@register("ArgMin", 1, cost=OUTPUT_ONLY)
def arg_min(data: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    return _arg(np.argmin, data, axis, keepdims, select_last_index)
