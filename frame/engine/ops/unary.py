"""Unary elementwise kernels: maths functions, activations and Clip.

Same dtype rule as ``elementwise``: the output keeps the input's dtype. Functions numpy lacks (erf)
are computed in float32 and cast back. Every kernel that keeps the shape and dtype is registered
``inplace=True`` and writes into its input when the runtime says it dies (``_reuse=True``).
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.blocks import map_row_blocks
from frame.engine.ops.elementwise import as_array, can_reuse, unary_ufunc
from frame.engine.ops.registry import OUTPUT_ONLY, VIEW, UnsupportedOp, passes, register

# Rational approximation of erf on [-4, 4] (erf(x) = x * P(x^2) / Q(x^2)), the float32 scheme used by
# Eigen and XLA; max error about 4e-7 (a few float32 ulps). Outside [-4, 4] erf is +-1 in float32.
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Vectorised float32 erf; ``out`` (float32, same shape) may be ``x`` itself."""
    x32 = np.clip(x, -4.0, 4.0, dtype=np.float32)
    x2 = x32 * x32
    p = np.full_like(x2, _ERF_P[0])
    for coef in _ERF_P[1:]:
        p *= x2
        p += np.float32(coef)
    q = np.full_like(x2, _ERF_Q[0])
    for coef in _ERF_Q[1:]:
        q *= x2
        q += np.float32(coef)
    p *= x32
    result = np.divide(p, q, out=out)
    return np.clip(result, -1.0, 1.0, out=result)


def _float_result(fn, x: np.ndarray, reuse: bool) -> np.ndarray:
    """Compute ``fn(block, out=block_out)`` on float32 in cache-sized row blocks; return x's dtype.

    These functions make many passes over their input; blocking keeps all but the first in cache.
    Writes into ``x`` when the runtime allows it and x is float32.
    """
    if x.dtype != np.float32 or x.ndim == 0 or not x.flags.c_contiguous:
        return as_array(fn(x.astype(np.float32), None).astype(x.dtype, copy=False))
    out = x if reuse and can_reuse(x, x.shape, x.dtype) else np.empty_like(x)
    rows = x.reshape(-1, x.shape[-1]) if x.shape[-1] else x.reshape(x.size, 1)
    map_row_blocks(fn, rows, out.reshape(rows.shape))
    return out


@register("Erf", 9, inplace=True, cost=passes(4.0))
def erf_op(x: np.ndarray, _reuse: bool = False) -> np.ndarray:
    return _float_result(erf, x, _reuse)


def _simple(name: str, ufunc: np.ufunc, since: int = 6) -> None:
    @register(name, since, inplace=True, cost=OUTPUT_ONLY)
    def kernel(x: np.ndarray, _reuse: bool = False) -> np.ndarray:
        return unary_ufunc(ufunc, x, _reuse)

    kernel.__name__ = kernel.__qualname__ = name.lower()


for _name, _ufunc in (
    ("Abs", np.abs), ("Neg", np.negative), ("Sqrt", np.sqrt), ("Exp", np.exp), ("Log", np.log),
    ("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Tanh", np.tanh), ("Floor", np.floor),
    ("Ceil", np.ceil), ("Reciprocal", np.reciprocal), ("Sign", np.sign),
    ("Round", np.rint), ("Asin", np.arcsin), ("Acos", np.arccos), ("Atan", np.arctan),
    ("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh), ("Acosh", np.arccosh), ("Atanh", np.arctanh),
):
    _simple(_name, _ufunc)


_simple("Not", np.logical_not, since=1)


@register("IsNaN", 9, cost=OUTPUT_ONLY)
def isnan(x: np.ndarray) -> np.ndarray:
    return as_array(np.isnan(x))


@register("IsInf", 10, cost=OUTPUT_ONLY)
def isinf(x: np.ndarray, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    return as_array(np.isinf(x) & (((x > 0) & bool(detect_positive)) | ((x < 0) & bool(detect_negative))))


@register("Identity", 1, cost=VIEW)
def identity(x: np.ndarray) -> np.ndarray:
    """Returns the input itself: arrays are never mutated unless the runtime says they die."""
    return x


@register("Dropout", 7, cost=VIEW)
def dropout_v7(x: np.ndarray, ratio: float = 0.5, _num_outputs: int = 1) -> np.ndarray | tuple[np.ndarray, ...]:
    """Inference: identity (``ratio`` is an attribute until opset 12), plus an all-true mask if asked."""
    return x if _num_outputs == 1 else (x, np.ones(x.shape, dtype=bool))


@register("Dropout", 12, cost=VIEW)
def dropout(x: np.ndarray, ratio: np.ndarray | None = None, training_mode: np.ndarray | None = None, /,
            *, seed: int = 0, _num_outputs: int = 1) -> np.ndarray | tuple[np.ndarray, ...]:
    """Inference: identity, and an all-true mask for the optional second output."""
    if training_mode is not None and bool(training_mode):
        raise ValueError("Dropout in training mode is not supported (inference engine)")
    return x if _num_outputs == 1 else (x, np.ones(x.shape, dtype=bool))


def _sigmoid(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    # 1 / (1 + exp(-x)): exp overflow to inf for very negative x gives the correct limit 0.
    with np.errstate(over="ignore"):
        result = np.negative(x, out=out)
        np.exp(result, out=result)
        result += 1.0
        return np.reciprocal(result, out=result)


@register("Sigmoid", 6, inplace=True, cost=OUTPUT_ONLY)
def sigmoid(x: np.ndarray, _reuse: bool = False) -> np.ndarray:
    return _float_result(_sigmoid, x, _reuse)


@register("Relu", 6, inplace=True, cost=OUTPUT_ONLY)
def relu(x: np.ndarray, _reuse: bool = False) -> np.ndarray:
    if _reuse and can_reuse(x, x.shape, x.dtype):
        return np.maximum(x, 0, out=x)
    return as_array(np.maximum(x, np.zeros((), x.dtype)))


@register("LeakyRelu", 6, cost=OUTPUT_ONLY)
def leaky_relu(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    return as_array(np.where(x < 0, x * np.asarray(alpha, x.dtype), x))


@register("Elu", 6, cost=OUTPUT_ONLY)
def elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return as_array(np.where(x < 0, np.asarray(alpha, x.dtype) * np.expm1(np.minimum(x, 0)), x))


@register("HardSigmoid", 6, cost=OUTPUT_ONLY)
def hard_sigmoid(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    return as_array(np.clip(x * np.asarray(alpha, x.dtype) + np.asarray(beta, x.dtype), 0, 1).astype(x.dtype))


@register("Softplus", 1, cost=OUTPUT_ONLY)
def softplus(x: np.ndarray) -> np.ndarray:
    return as_array(np.logaddexp(x, np.zeros((), x.dtype)))


@register("Mish", 18, cost=OUTPUT_ONLY)
def mish(x: np.ndarray) -> np.ndarray:
    return as_array(x * np.tanh(np.logaddexp(x, np.zeros((), x.dtype))))


def _gelu_exact(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    half = np.multiply(x, np.float32(0.5))
    result = erf(np.multiply(x, np.float32(1 / np.sqrt(2.0))), out=out)
    result += 1.0
    return np.multiply(result, half, out=result)


def _gelu_tanh(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    inner = x * x
    inner *= np.float32(0.044715)
    inner += 1.0
    inner *= x
    inner *= np.float32(np.sqrt(2.0 / np.pi))
    half = np.multiply(x, np.float32(0.5))
    result = np.tanh(inner, out=out)
    result += 1.0
    return np.multiply(result, half, out=result)


def _validate_gelu(attrs: dict) -> None:
    if attrs.get("approximate", "none") not in ("none", "tanh"):
        raise UnsupportedOp(f"Gelu attribute 'approximate' = {attrs['approximate']!r} (expected none or tanh)")


@register("Gelu", 20, inplace=True, validate=_validate_gelu, cost=passes(4.0))
def gelu(x: np.ndarray, approximate: str = "none", _reuse: bool = False) -> np.ndarray:
    return _float_result(_gelu_tanh if approximate == "tanh" else _gelu_exact, x, _reuse)


@register("Clip", 6, cost=OUTPUT_ONLY)
def clip_v6(x: np.ndarray, min: float = -3.4028234663852886e38, max: float = 3.4028234663852886e38) -> np.ndarray:
    return as_array(np.clip(x, np.asarray(min, x.dtype), np.asarray(max, x.dtype)))


@register("Clip", 11, inplace=True, cost=OUTPUT_ONLY)
def clip(x: np.ndarray, min: np.ndarray | None = None, max: np.ndarray | None = None, /,
         *, _reuse: bool = False) -> np.ndarray:
    """Bounds are optional inputs from opset 11 on (attributes before)."""
    low = None if min is None else min.astype(x.dtype)
    high = None if max is None else max.astype(x.dtype)
    if low is None and high is None:
        return x
    out = x if _reuse and can_reuse(x, x.shape, x.dtype) else None
    return as_array(np.clip(x, low, high, out=out))


@register("Selu", 6, cost=OUTPUT_ONLY)
def selu(x: np.ndarray, alpha: float = 1.67326319217681884765625,
         gamma: float = 1.05070102214813232421875) -> np.ndarray:
    scaled = np.where(x > 0, x, np.asarray(alpha, x.dtype) * np.expm1(np.minimum(x, 0)))
    return as_array((np.asarray(gamma, x.dtype) * scaled).astype(x.dtype, copy=False))


@register("HardSwish", 14, cost=OUTPUT_ONLY)
def hard_swish(x: np.ndarray) -> np.ndarray:
    return as_array((x * np.clip(x / np.asarray(6, x.dtype) + np.asarray(0.5, x.dtype), 0, 1)).astype(x.dtype))


@register("Softsign", 1, cost=OUTPUT_ONLY)
def softsign(x: np.ndarray) -> np.ndarray:
    return as_array(x / (np.ones((), x.dtype) + np.abs(x)))


@register("ThresholdedRelu", 10, cost=OUTPUT_ONLY)
def thresholded_relu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return as_array(np.where(x > np.asarray(alpha, x.dtype), x, np.zeros((), x.dtype)))


@register("Celu", 12, cost=OUTPUT_ONLY)
def celu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    a = np.asarray(alpha, x.dtype)
    return as_array(np.maximum(x, 0) + np.minimum(0, a * np.expm1(x / a)))


@register("Shrink", 9, cost=OUTPUT_ONLY)
def shrink(x: np.ndarray, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    shifted = np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))
    return as_array(shifted.astype(x.dtype, copy=False))


@register("BitwiseNot", 18, cost=OUTPUT_ONLY)
def bitwise_not(x: np.ndarray) -> np.ndarray:
    return as_array(np.invert(x))
