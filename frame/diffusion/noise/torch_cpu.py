"""torch's CPU generator in numpy, bit for bit: ``torch.randn(shape, generator=torch.Generator().
manual_seed(seed))`` and every draw after it from the same generator, without torch.

This is the noise ComfyUI draws for its latents, diffusers with a CPU generator, and A1111 with
"Random number generator source: CPU". Three parts, each as torch 2.x computes it:

* the engine: mt19937 seeded with the seed's low 32 bits (numpy's MT19937 core, given the key that
  torch's ``init_with_uint32`` computes, so the 32-bit outputs are the same);
* a float32 tensor of 16 values or more (every latent): one 24-bit uniform per value, then a
  Box–Muller transform on blocks of 16 (the first 8 uniforms give the radii, the next 8 the angles),
  and when the size is not a multiple of 16, 16 fresh uniforms recompute the last 16 values. On x86
  torch computes the block with ``avx_mathfun.h``'s cephes polynomials for log and sincos (its AVX2
  and AVX512 builds alike), compiled with fused multiply-adds; ``_log`` and ``_sincos`` follow those
  operations one by one, with ``fma32`` where the compiler fuses;
* fewer than 16 values: one double-precision Box–Muller pair per two values from 53-bit uniforms,
  the second value of a pair kept in the generator for the next draw (as torch caches it).

torch builds without AVX2 (ARM, e.g. a Pi) take a scalar path whose results differ from these in the
last bit of some values; the pictures are the same to the eye, not to the bit.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from frame.diffusion.samplers.base import NoiseState

Float32s = np.ndarray | np.float32  # float32 values: an array or one number

F32 = np.float32
_STATE_WORDS = 624
_U24 = F32(2.0**-24)
_U53 = 2.0**-53
_TWO_PI_F32 = F32(2.0 * math.pi)
_LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
             -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)


def mt19937_key(seed: int) -> np.ndarray:
    """The 624-word state torch's ``mt19937(seed)`` starts from (the seed's low 32 bits)."""
    key = np.empty(_STATE_WORDS, dtype=np.uint32)
    value = seed & 0xFFFFFFFF
    key[0] = value
    for index in range(1, _STATE_WORDS):
        value = (1812433253 * (value ^ (value >> 30)) + index) & 0xFFFFFFFF
        key[index] = value
    return key


def fma32(a: Float32s, b: Float32s, c: Float32s) -> np.ndarray:
    """float32 fused multiply-add (one rounding of ``a * b + c``), as the compiled kernel computes it.

    The product of two float32 is exact in float64; the float64 sum can be off only by landing exactly
    on a float32 halfway point, which the sum's exact error (TwoSum) then breaks the right way.
    """
    product = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    addend = np.asarray(c, np.float64)
    total = product + addend
    virtual = total - product
    error = (product - (total - virtual)) + (addend - virtual)
    rounded = total.astype(F32)
    back = rounded.astype(np.float64)
    halfway = (back != total) & (np.abs(total - back) == np.abs(np.spacing(rounded, dtype=F32)).astype(np.float64) / 2)
    fix = halfway & (error != 0)
    if np.any(fix):
        toward = np.where(error > 0, F32(np.inf), F32(-np.inf)).astype(F32)
        # the tie went to even; the exact value lies beyond the halfway point on the error's side
        exact_side = np.where(np.sign(total - back) == np.sign(error), np.nextafter(rounded, toward), rounded)
        rounded = np.where(fix, exact_side, rounded).astype(F32)
    return rounded


def _log(x: np.ndarray) -> np.ndarray:
    """avx_mathfun's ``log256_ps`` for x in (0, 1] (cephes logf), float32 op by op."""
    bits = x.view(np.int32)
    exponent = ((bits >> 23) - 127).astype(F32) + F32(1)
    x = ((bits & ~0x7F800000) | F32(0.5).view(np.int32)).view(F32)  # mantissa in [0.5, 1)
    below = x < F32(0.707106781186547524)
    x = (x - F32(1)) + np.where(below, x, F32(0))
    exponent = exponent - np.where(below, F32(1), F32(0))
    z = x * x
    y = np.full_like(x, F32(_LOG_POLY[0]))
    for coefficient in _LOG_POLY[1:]:
        y = fma32(y, x, F32(coefficient))
    y = fma32(y * x, z, exponent * F32(-2.12194440e-4))
    y = fma32(-z, F32(0.5), y)
    return fma32(exponent, F32(0.693359375), x + y)


def _sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """avx_mathfun's ``sincos256_ps`` for x >= 0 (cephes sinf/cosf), float32 op by op."""
    octant = ((x * F32(1.27323954473516)).astype(np.int32) + 1) & ~1
    y = octant.astype(F32)
    x = fma32(y, F32(-0.78515625), x)
    x = fma32(y, F32(-2.4187564849853515625e-4), x)
    x = fma32(y, F32(-3.77489497744594108e-8), x)
    z = x * x
    cos_poly = fma32(F32(2.443315711809948e-5), z, F32(-1.388731625493765e-3))
    cos_poly = fma32(cos_poly, z, F32(4.166664568298827e-2))
    cos_poly = fma32(cos_poly * z, z, -(z * F32(0.5))) + F32(1)
    sin_poly = fma32(F32(-1.9515295891e-4), z, F32(8.3321608736e-3))
    sin_poly = fma32(sin_poly, z, F32(-1.6666654611e-1))
    sin_poly = fma32(sin_poly * z, x, x)
    first = (octant & 2) == 0
    sin = np.where(first, sin_poly, cos_poly)
    cos = np.where(first, cos_poly, sin_poly)
    sin = np.where((octant & 4) != 0, -sin, sin)
    cos = np.where(((octant - 2) & 4) == 0, -cos, cos)
    return sin, cos


def box_muller_16(uniforms: np.ndarray) -> np.ndarray:
    """torch's ``NormalFill16`` on rows of 16 float32 uniforms in [0, 1): 16 standard normals per row."""
    radius = np.sqrt(F32(-2) * _log(F32(1) - uniforms[:, :8]))
    sin, cos = _sincos(_TWO_PI_F32 * uniforms[:, 8:])
    return np.concatenate([radius * cos, radius * sin], axis=1)


class TorchCpuNoise:
    """Seeded standard-normal float32 noise, the values torch's CPU generator gives for the same seed.

    One generator serves the whole render, as diffusers' ``generator=``: the initial latent is the first
    draw, an ancestral sampler's step noise the draws after it. The state is JSON-able for resume.
    """

    def __init__(self, seed: int) -> None:
        self._engine = np.random.MT19937()
        self._engine.state = {"bit_generator": "MT19937", "state": {"key": mt19937_key(seed), "pos": _STATE_WORDS}}
        self._cached: float | None = None  # the second value of torch's last double Box–Muller pair

    def _u32(self, count: int) -> np.ndarray:
        return self._engine.random_raw(count).astype(np.uint32)

    def _float_uniforms(self, count: int) -> np.ndarray:
        return (self._u32(count) & 0xFFFFFF).astype(F32) * _U24

    def normal(self, shape: tuple[int, ...]) -> np.ndarray:
        count = math.prod(shape)
        if count < 16:
            return np.array([self._double_normal() for _ in range(count)], dtype=np.float64).astype(F32).reshape(shape)
        values = self._float_uniforms(count)
        whole = count // 16 * 16
        values[:whole] = box_muller_16(values[:whole].reshape(-1, 16)).reshape(-1)
        if count % 16:
            values[count - 16:] = box_muller_16(self._float_uniforms(16).reshape(1, 16)).reshape(-1)
        return values.reshape(shape)

    def _double_normal(self) -> float:
        """torch's ``normal_distribution<double>``: glibc's double log1p/sin/cos through Python's math."""
        if self._cached is not None:
            value, self._cached = self._cached, None
            return value
        u1, u2 = self._double_uniform(), self._double_uniform()
        radius = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        self._cached = radius * math.sin(theta)
        return radius * math.cos(theta)

    def _double_uniform(self) -> float:
        high, low = (int(v) for v in self._u32(2))
        return (((high << 32) | low) & ((1 << 53) - 1)) * _U53

    def get_state(self) -> NoiseState:
        state = self._engine.state["state"]
        return {"source": "torch-cpu", "key": [int(v) for v in state["key"]], "pos": int(state["pos"]),
                "cached": self._cached}

    def set_state(self, state: NoiseState) -> None:
        self._engine.state = {"bit_generator": "MT19937",
                              "state": {"key": np.asarray(state["key"], dtype=np.uint32), "pos": int(state["pos"])}}
        self._cached = state.get("cached")
