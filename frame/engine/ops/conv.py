"""Conv and ConvTranspose (1-D and 2-D, any groups, strides, dilations, pads, auto_pad) without im2col.

Why no im2col: for a 3x3 conv im2col materialises 9 copies of the input (47 MB for 320x64x64), too
much for a Pi Zero's 512 MB. Instead each kernel tap (i, j) is one GEMM over a *view* of the padded
input, accumulated into the output:

* The padded input is split into stride x stride phases (``x[:, a::s, b::s]``; one phase, no copy
  beyond padding, when stride is 1). Tap (i, j) reads phase ((i*d) % s, (j*d) % s) shifted by
  ((i*d) // s, (j*d) // s).
* Flattening a phase over (rows, cols), the shifted window for *all* output pixels is one contiguous
  column range of length Ho * Wq: a strided 2-D view BLAS takes directly. The Wq - Wo extra columns
  per row are computed and cropped at the end (a few percent of work for 3x3 convs).

Memory beyond input and output: one padded copy of the input plus two output-sized buffers. 1x1 convs
without stride or padding are a single GEMM on the input itself. Dtypes: fp16 input or weights are
widened to float32 per call; the result is fp16 only if all float operands were fp16.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.linalg import float32_operands
from frame.engine.ops.registry import UnsupportedOp, register

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def validate_conv(attrs: dict) -> None:
    """Load-time check shared by Conv, ConvTranspose and pooling: 1-D/2-D only, known auto_pad."""
    if attrs.get("auto_pad", "NOTSET") not in _AUTO_PADS:
        raise UnsupportedOp(f"attribute 'auto_pad' = {attrs['auto_pad']!r} (expected one of {_AUTO_PADS})")
    for name in ("kernel_shape", "strides", "dilations"):
        if name in attrs and len(attrs[name]) not in (1, 2):
            raise UnsupportedOp(f"attribute {name!r} = {attrs[name]}: only 1-D and 2-D are supported")


def spatial_params(kernel: tuple[int, ...], in_shape: tuple[int, ...], strides, dilations, pads,
                   auto_pad: str) -> tuple[list[int], list[int], list[int]]:
    """Strides, dilations and [begin..., end...] pads for the spatial dims, resolving auto_pad."""
    rank = len(kernel)
    strides = list(strides or [1] * rank)
    dilations = list(dilations or [1] * rank)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(in_shape, kernel, strides, dilations):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begins.append(large if auto_pad == "SAME_LOWER" else small)
            ends.append(small if auto_pad == "SAME_LOWER" else large)
        pads = begins + ends
    elif auto_pad == "VALID" or not pads:
        pads = [0] * (2 * rank)
    return strides, dilations, list(pads)


def _as_2d(x: np.ndarray, w: np.ndarray, strides, dilations, pads):
    """1-D convs run as 2-D convs with a height of 1."""
    if x.ndim == 3:
        return x[:, :, None, :], w[:, :, None, :], [1, *strides], [1, *dilations], [0, pads[0], 0, pads[1]]
    if x.ndim != 4:
        raise ValueError(f"Conv supports 1-D and 2-D inputs (rank 3 or 4), got shape {x.shape}")
    return x, w, strides, dilations, pads


def _phases(x: np.ndarray, pads, stride, dilation, kernel, out_hw) -> tuple[np.ndarray, int]:
    """(s*s, C, Hq, Wq) zero-padded phase images of one image ``x`` (C, H, W), and Wq."""
    (sh, sw), (dh, dw), (kh, kw), (ho, wo) = stride, dilation, kernel, out_hw
    hq = ho + ((kh - 1) * dh) // sh + 1  # one spare row: shifted windows may run past the last row
    wq = max(wo + ((kw - 1) * dw) // sw, -(-(x.shape[2] + pads[1] + pads[3]) // sw))
    padded = np.zeros((x.shape[0], hq * sh, wq * sw), dtype=x.dtype)
    h_end = min(pads[0] + x.shape[1], hq * sh)
    w_end = min(pads[1] + x.shape[2], wq * sw)
    padded[:, pads[0]:h_end, pads[1]:w_end] = x[:, : h_end - pads[0], : w_end - pads[1]]
    if sh == sw == 1:
        return padded[None], wq
    phases = padded.reshape(x.shape[0], hq, sh, wq, sw).transpose(2, 4, 0, 1, 3)
    return np.ascontiguousarray(phases).reshape(sh * sw, x.shape[0], hq, wq), wq


def _conv_image(x: np.ndarray, taps: np.ndarray, group: int, stride, dilation, pads, out_hw) -> np.ndarray:
    """One image: x (C, H, W), taps (kh, kw, M, C/group) -> (M, Ho, Wo) float32."""
    kh, kw, m, cg = taps.shape
    ho, wo = out_hw
    phases, wq = _phases(x, pads, stride, dilation, (kh, kw), out_hw)
    flat = phases.reshape(phases.shape[0], phases.shape[1], -1)
    wide = np.empty((m, ho * wq), dtype=np.float32)
    scratch = np.empty((m // group, ho * wq), dtype=np.float32)
    mg = m // group
    for g in range(group):
        target = wide[g * mg:(g + 1) * mg]
        first = True
        for i in range(kh):
            for j in range(kw):
                phase = (i * dilation[0] % stride[0]) * stride[1] + (j * dilation[1] % stride[1])
                offset = (i * dilation[0] // stride[0]) * wq + (j * dilation[1] // stride[1])
                window = flat[phase, g * cg:(g + 1) * cg, offset:offset + ho * wq]
                np.matmul(taps[i, j, g * mg:(g + 1) * mg], window, out=target if first else scratch)
                if not first:
                    target += scratch
                first = False
    return wide.reshape(m, ho, wq)[:, :, :wo]


def _validate_conv(attrs: dict) -> None:
    validate_conv(attrs)


@register("Conv", 1, validate=_validate_conv)
def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, /, *, auto_pad: str = "NOTSET",
         dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None,
         pads: list[int] | None = None, strides: list[int] | None = None) -> np.ndarray:
    (x32, w32, b32), dtype = float32_operands(x, w, b)
    strides, dilations, pads = spatial_params(w.shape[2:], x.shape[2:], strides, dilations, pads, auto_pad)
    x32, w32, strides, dilations, pads = _as_2d(x32, w32, strides, dilations, pads)
    n, c, h, wd = x32.shape
    m, cg, kh, kw = w32.shape
    if c != cg * group or m % group:
        raise ValueError(f"Conv: input has {c} channels, weight {w.shape} with group={group} expects {cg * group}")
    ho = (h + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    wo = (wd + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    out = np.empty((n, m, ho, wo), dtype=np.float32)
    if kh == kw == 1 and group == 1 and strides == [1, 1] and not any(pads):
        np.matmul(w32.reshape(m, c), x32.reshape(n, c, h * wd), out=out.reshape(n, m, h * wd))
    else:
        taps = np.ascontiguousarray(w32.transpose(2, 3, 0, 1))
        for i in range(n):
            out[i] = _conv_image(x32[i], taps, group, strides, dilations, pads, (ho, wo))
    if b32 is not None:
        out += b32.reshape(1, m, 1, 1)
    if x.ndim == 3:
        out = out[:, :, 0, :]
    return out.astype(dtype, copy=False)


def _transpose_pads(in_hw, kernel, strides, dilations, pads, output_padding, output_shape, auto_pad):
    """Begin/end pads of ConvTranspose, derived from ``output_shape`` or auto_pad when given."""
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [size * s for size, s in zip(in_hw, strides)]
    if output_shape is None:
        return list(pads or [0] * 4)
    begins, ends = [], []
    for size, k, s, d, extra, want in zip(in_hw, kernel, strides, dilations, output_padding, output_shape[-2:]):
        total = max(s * (size - 1) + extra + (k - 1) * d + 1 - want, 0)
        if auto_pad == "SAME_UPPER":
            begins.append(total // 2)
            ends.append(total - total // 2)
        else:
            begins.append(total - total // 2)
            ends.append(total // 2)
    return begins + ends


@register("ConvTranspose", 1, validate=_validate_conv)
def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, /, *, auto_pad: str = "NOTSET",
                   dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None,
                   output_padding: list[int] | None = None, output_shape: list[int] | None = None,
                   pads: list[int] | None = None, strides: list[int] | None = None) -> np.ndarray:
    """Scatter form: each tap's GEMM result is added into a strided view of the full output."""
    (x32, w32, b32), dtype = float32_operands(x, w, b)
    rank = w.ndim - 2
    strides, dilations = list(strides or [1] * rank), list(dilations or [1] * rank)
    output_padding = list(output_padding or [0] * rank)
    if x.ndim == 3:
        x32, w32 = x32[:, :, None, :], w32[:, :, None, :]
        strides, dilations, output_padding = [1, *strides], [1, *dilations], [0, *output_padding]
        pads = None if pads is None else [0, pads[0], 0, pads[1]]
        output_shape = None if output_shape is None else [1, output_shape[-1]]
    n, c, h, wd = x32.shape
    _, mg, kh, kw = w32.shape
    cg = c // group
    pads = _transpose_pads((h, wd), (kh, kw), strides, dilations, pads, output_padding, output_shape, auto_pad)
    full_h = (h - 1) * strides[0] + (kh - 1) * dilations[0] + 1 + output_padding[0]
    full_w = (wd - 1) * strides[1] + (kw - 1) * dilations[1] + 1 + output_padding[1]
    full = np.zeros((n, mg * group, full_h, full_w), dtype=np.float32)
    taps = np.ascontiguousarray(w32.transpose(2, 3, 1, 0))  # (kh, kw, M/group, C)
    for i_n in range(n):
        for g in range(group):
            image = x32[i_n, g * cg:(g + 1) * cg].reshape(cg, h * wd)
            target = full[i_n, g * mg:(g + 1) * mg]
            for i in range(kh):
                for j in range(kw):
                    part = (taps[i, j, :, g * cg:(g + 1) * cg] @ image).reshape(mg, h, wd)
                    rows = slice(i * dilations[0], i * dilations[0] + (h - 1) * strides[0] + 1, strides[0])
                    cols = slice(j * dilations[1], j * dilations[1] + (wd - 1) * strides[1] + 1, strides[1])
                    target[:, rows, cols] += part
    out = full[:, :, pads[0]:full_h - pads[2], pads[1]:full_w - pads[3]]
    if b32 is not None:
        out = out + b32.reshape(1, -1, 1, 1)
    if x.ndim == 3:
        out = out[:, :, 0, :]
    return np.ascontiguousarray(out).astype(dtype, copy=False)
