"""Random-number kernels: RandomNormal(Like) and RandomUniform(Like).

Exported Stable Diffusion VAE encoders sample the latent inside the graph (diffusers' conversion
script and optimum before 1.23 export ``latent_dist.sample()``: ConstantOfShape → RandomNormalLike →
mean + std * noise), so the engine must run these ops. Their values can never equal onnxruntime's
(its generator is its own), so what matters is who picks them:

* ``Model.run(..., rng=GEN)`` hands the kernels ``GEN`` (the ``_rng`` runtime hint): any object with
  numpy Generator's ``standard_normal(size, dtype=...)`` and ``random(size, dtype=...)``. The caller
  then decides the noise — frame's pipeline passes the seeded draw diffusers would have made.
* without ``rng``, a node's ``seed`` attribute seeds a fresh numpy generator for every run (the same
  values each run), and a node without one draws from fresh OS entropy, as the spec allows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from frame.engine.ops.convert import ONNX_TO_NUMPY
from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, register


def _validate_dtype(attrs: dict) -> None:
    dtype = attrs.get("dtype")
    if dtype is not None and (dtype not in ONNX_TO_NUMPY or ONNX_TO_NUMPY[dtype].kind != "f"):
        raise UnsupportedOp(f"random op attribute 'dtype' = {dtype} is not a floating-point type this engine runs")


def _validate_shaped(attrs: dict) -> None:
    _validate_dtype(attrs)
    if attrs.get("shape") is None:
        raise UnsupportedOp("RandomNormal/RandomUniform need the attribute 'shape'")


def _generator(rng: Any, seed: float | None) -> Any:
    if rng is not None:
        return rng
    return np.random.default_rng(None if seed is None else int(seed))


def _normal(shape: tuple[int, ...], dtype: np.dtype, mean: float, scale: float, seed: float | None,
            rng: Any) -> np.ndarray:
    draw = np.asarray(_generator(rng, seed).standard_normal(shape, dtype=np.float32))
    if draw.shape != tuple(shape):
        raise ValueError(f"the random generator returned shape {draw.shape}, the node needs {tuple(shape)}")
    if mean != 0.0 or scale != 1.0:
        draw = np.float32(mean) + np.float32(scale) * draw
    return draw.astype(dtype, copy=False)


def _uniform(shape: tuple[int, ...], dtype: np.dtype, low: float, high: float, seed: float | None,
             rng: Any) -> np.ndarray:
    draw = np.asarray(_generator(rng, seed).random(shape, dtype=np.float32))
    if draw.shape != tuple(shape):
        raise ValueError(f"the random generator returned shape {draw.shape}, the node needs {tuple(shape)}")
    return (np.float32(low) + np.float32(high - low) * draw).astype(dtype, copy=False)


def _like_dtype(x: np.ndarray, dtype: int | None) -> np.dtype:
    if dtype is not None:
        return ONNX_TO_NUMPY[dtype]
    if x.dtype.kind != "f":
        raise ValueError(f"input has dtype {x.dtype}: give the 'dtype' attribute for a non-float input")
    return x.dtype


@register("RandomNormal", 1, validate=_validate_shaped, cost=OUTPUT_ONLY)
def random_normal(dtype: int = 1, mean: float = 0.0, scale: float = 1.0, seed: float | None = None,
                  shape: list[int] | None = None, *, _rng: Any = None) -> np.ndarray:
    assert shape is not None  # checked at load time
    return _normal(tuple(shape), ONNX_TO_NUMPY[dtype], mean, scale, seed, _rng)


@register("RandomNormalLike", 1, validate=_validate_dtype, cost=OUTPUT_ONLY)
def random_normal_like(x: np.ndarray, dtype: int | None = None, mean: float = 0.0, scale: float = 1.0,
                       seed: float | None = None, *, _rng: Any = None) -> np.ndarray:
    return _normal(x.shape, _like_dtype(x, dtype), mean, scale, seed, _rng)


@register("RandomUniform", 1, validate=_validate_shaped, cost=OUTPUT_ONLY)
def random_uniform(dtype: int = 1, high: float = 1.0, low: float = 0.0, seed: float | None = None,
                   shape: list[int] | None = None, *, _rng: Any = None) -> np.ndarray:
    assert shape is not None  # checked at load time
    return _uniform(tuple(shape), ONNX_TO_NUMPY[dtype], low, high, seed, _rng)


@register("RandomUniformLike", 1, validate=_validate_dtype, cost=OUTPUT_ONLY)
def random_uniform_like(x: np.ndarray, dtype: int | None = None, high: float = 1.0, low: float = 0.0,
                        seed: float | None = None, *, _rng: Any = None) -> np.ndarray:
    return _uniform(x.shape, _like_dtype(x, dtype), low, high, seed, _rng)
