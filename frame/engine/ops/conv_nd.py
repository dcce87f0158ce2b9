"""Convolutions of any rank by plain im2col: 3-D Conv and ConvTranspose, and ConvInteger.

The 1-D/2-D float kernels in ``conv`` and ``conv_grouped`` are tuned for speed and memory; the ops
here are rarer (volumetric models, integer-quantised convs) and favour one simple, exact form:
each kernel tap is a strided view of the zero-padded input, the taps are copied side by side into a
column matrix and one (batched, for groups) GEMM produces the output. ConvTranspose scatters one
GEMM per tap into strided views of the full output, then crops the pads. ConvInteger subtracts the
zero points and computes in float64, exact for every int32 result.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from frame.engine.ops.conv_params import spatial_params
from frame.engine.ops.cost import CONV, Cost, CostQuery, Work, known
from frame.engine.ops.cost import size as elements
from frame.engine.ops.registry import register


def _out_size(size: int, k: int, s: int, d: int, before: int, after: int) -> int:
    out = (size + before + after - (k - 1) * d - 1) // s + 1
    if out <= 0:
        raise ValueError(f"Conv: kernel size {k} (dilation {d}) is larger than the padded input ({size} + pads "
                         f"{before}, {after})")
    return out


def conv_nd(x: np.ndarray, w: np.ndarray, group: int, strides, dilations, pads, dtype=np.float32) -> np.ndarray:
    """x (N, C, *spatial), w (M, C/group, *kernel) -> (N, M, *out) computed in ``dtype``, no bias."""
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = w.shape[2:]
    rank = len(kernel)
    if c != cg * group or m % group:
        raise ValueError(f"Conv: input has {c} channels, weight {w.shape} with group={group} expects {cg * group}")
    outs = [_out_size(size, k, s, d, pads[i], pads[i + rank])
            for i, (size, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations))]
    padded = np.pad(x.astype(dtype, copy=False), [(0, 0), (0, 0)] + [(pads[i], pads[i + rank]) for i in range(rank)])
    taps = math.prod(kernel)
    columns = np.empty((n, c, taps, *outs), dtype=dtype)
    for t, offsets in enumerate(itertools.product(*[range(k) for k in kernel])):
        window = tuple(slice(o * d, o * d + (out - 1) * s + 1, s)
                       for o, d, s, out in zip(offsets, dilations, strides, outs))
        columns[:, :, t] = padded[(slice(None), slice(None), *window)]
    columns = columns.reshape(n, group, cg * taps, math.prod(outs))
    kernels = w.astype(dtype, copy=False).reshape(group, m // group, cg * taps)
    return np.matmul(kernels, columns).reshape(n, m, *outs)


def transpose_pads(in_dims, kernel, strides, dilations, pads, output_padding, output_shape, auto_pad) -> list[int]:
    """[begin..., end...] pads of a ConvTranspose, derived from ``output_shape`` or auto_pad if given
    (negative: zeros appended to reach the requested size)."""
    rank = len(kernel)
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [size * s for size, s in zip(in_dims, strides)]
    if output_shape is None:
        return list(pads or [0] * (2 * rank))
    begins, ends = [], []
    for size, k, s, d, extra, want in zip(in_dims, kernel, strides, dilations, output_padding, output_shape[-rank:]):
        total = s * (size - 1) + extra + (k - 1) * d + 1 - want
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def conv_transpose_nd(x: np.ndarray, w: np.ndarray, group: int, strides, dilations, pads, output_padding,
                      output_shape, auto_pad) -> np.ndarray:
    """x (N, C, *spatial) float32, w (C, M/group, *kernel) -> (N, M, *out), no bias."""
    n, c = x.shape[:2]
    mg = w.shape[1]
    kernel = w.shape[2:]
    rank = len(kernel)
    cg = c // group
    in_dims = x.shape[2:]
    pads = transpose_pads(in_dims, kernel, strides, dilations, pads, output_padding, output_shape, auto_pad)
    full = [(size - 1) * s + (k - 1) * d + 1 + extra
            for size, k, s, d, extra in zip(in_dims, kernel, strides, dilations, output_padding)]
    result = np.zeros((n, mg * group, *full), dtype=np.float32)
    taps = np.moveaxis(w.reshape(c, mg, -1), 2, 0)  # (taps, C, M/group)
    images = x.reshape(n, group, cg, -1)
    for t, offsets in enumerate(itertools.product(*[range(k) for k in kernel])):
        window = tuple(slice(o * d, o * d + (size - 1) * s + 1, s)
                       for o, d, s, size in zip(offsets, dilations, strides, in_dims))
        for g in range(group):
            part = taps[t, g * cg:(g + 1) * cg].T @ images[:, g]  # (N, M/group, positions)
            result[(slice(None), slice(g * mg, (g + 1) * mg), *window)] += part.reshape(n, mg, *in_dims)
    if min(pads) < 0:  # output_shape asks for more than the full result: extend it with zeros
        result = np.pad(result, [(0, 0), (0, 0)] + [(max(-pads[i], 0), max(-pads[i + rank], 0))
                                                     for i in range(rank)])
        pads = [max(p, 0) for p in pads]
    crop = tuple(slice(pads[i], result.shape[2 + i] - pads[i + rank]) for i in range(rank))
    return np.ascontiguousarray(result[(slice(None), slice(None), *crop)])


def _subtract_zero_point(values: np.ndarray, zero_point: np.ndarray | None, axis_size: int | None) -> np.ndarray:
    out = values.astype(np.float64)
    if zero_point is None:
        return out
    zp = np.asarray(zero_point, np.float64)
    if zp.size > 1:  # per output channel (weights only)
        if zp.size != axis_size:
            raise ValueError(f"ConvInteger: {zp.size} weight zero points for {axis_size} output channels")
        zp = zp.reshape((-1,) + (1,) * (values.ndim - 1))
    return out - zp.reshape(zp.shape if zp.size > 1 else ())


def conv_work(query: CostQuery) -> Work | None:
    """Every output element sums ``C/group × kh × kw`` products: ``prod(out) × prod(w[1:])``."""
    out, w = query.out(), query.shape(1)
    if not (known(out) and known(w)):
        return None
    return Work(CONV, elements(out) * elements(w[1:]))  # type: ignore[index]


def conv_transpose_work(query: CostQuery) -> Work | None:
    """Every input element is scattered to ``M/group × kh × kw`` outputs: ``prod(in) × prod(w[1:])``."""
    x, w = query.shape(0), query.shape(1)
    if not (known(x) and known(w)):
        return None
    return Work(CONV, elements(x) * elements(w[1:]))  # type: ignore[index]


@register("ConvInteger", 10, cost=Cost(work=conv_work))
def conv_integer(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                 w_zero_point: np.ndarray | None = None, /, *, auto_pad: str = "NOTSET",
                 dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None,
                 pads: list[int] | None = None, strides: list[int] | None = None) -> np.ndarray:
    """int32 (x - x_zero_point) ⊛ (w - w_zero_point); padding contributes zero (after the shift)."""
    if x_zero_point is not None and np.asarray(x_zero_point).size != 1:
        raise ValueError("ConvInteger: the input zero point must be a scalar")
    strides, dilations, pads = spatial_params(w.shape[2:], x.shape[2:], strides, dilations, pads, auto_pad)
    shifted_x = _subtract_zero_point(x, x_zero_point, None)
    shifted_w = _subtract_zero_point(w, w_zero_point, w.shape[0])
    out = conv_nd(shifted_x, shifted_w, group, strides, dilations, pads, dtype=np.float64)
    return np.rint(out).astype(np.int32)
