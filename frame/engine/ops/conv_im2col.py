"""The conv paths beside the dense banded 2-D kernel in ``conv``, and the pieces they share with it.

* Spatial parameters (``spatial_params``: strides, dilations and pads with ``auto_pad`` resolved),
  shared with ``conv`` and pooling; here, below ``conv``, so the N-d kernels need not import ``conv``.
* ``PaddedRows``: rows of a zero-padded image filled band by band into one reusable buffer (the
  banded im2col in ``conv`` and the Winograd bands in ``conv_winograd`` read through it).
* The grouped 2-D kernels and the any-rank ones (3-D; ConvInteger, in ``optional.integer``, runs on them), below.

**Grouped** 2-D convolutions without a per-group GEMM loop: depthwise by taps, grouped by one batched GEMM.

Mobile networks (MobileNetV3, PP-LCNet, the OCR and detection models that ship in Python wheels) are
built from depthwise convs: ``group == C``, one input channel per group. Run as ``group`` separate
GEMMs of one row each, a 5×5 depthwise conv over 384 channels was ten times onnxruntime's time. Here:

* **depthwise** (one input channel per group, any channel multiplier): each output channel is the
  sum over kernel taps of a strided view of its padded input plane times one scalar. The taps of a
  block of channels and rows (``COLUMN_BLOCK_ELEMENTS``, cache-sized) are copied side by side and
  reduced by one batched matrix-vector product; big layers split their blocks over the CPU cores
  (numpy releases the GIL). The views are 1-D over the padded image's flat layout (see
  ``depthwise_conv2d``), so numpy's inner loops are long even when the image is 20 pixels wide.
* **grouped** (several input channels per group): the column matrix of all groups is built once per
  band of output rows and multiplied by the group weights in one batched ``np.matmul``
  ``(G, M/G, C/G·k) @ (G, C/G·k, P)``.
* **narrow** (dense, stride 1, many more input than output channels, e.g. 96 -> 24 in PP-OCR's
  neck): one GEMM per band over the padded input rows as they lie, then shifted tap sums
  (``narrow_conv2d``), instead of an im2col copy of the wide input.

Both pad the input once (an input-sized copy): grouped convs appear in small networks, not in the
SD UNet/VAE whose memory the banded kernel in ``conv`` protects.

**Any rank**: convolutions by plain im2col: 3-D Conv and ConvTranspose, and ConvInteger (``optional.integer``).

The 1-D/2-D float kernels in ``conv`` and the grouped ones above are tuned for speed and memory; the ops
here are rarer (volumetric models, integer-quantised convs) and favour one simple, exact form:
each kernel tap is a strided view of the zero-padded input, the taps are copied side by side into a
column matrix and one (batched, for groups) GEMM produces the output. ConvTranspose scatters one
GEMM per tap into strided views of the full output, then crops the pads. ``conv_nd`` takes a ``dtype``
so ConvInteger can compute in float64, exact for every int32 result.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from frame.engine import buffers
from frame.engine.ops.blocks import MIN_PARALLEL_BYTES, matmul_into, run_tasks, workers
from frame.engine.ops.cost import CONV, CostQuery, Work, known
from frame.engine.ops.cost import size as elements


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


class PaddedRows:
    """Reusable buffer holding rows of the zero-padded image, so the image is never padded whole.

    Padding a 256x512x512 VAE activation at once would cost another 256 MB. The pad columns are
    zeroed once at allocation and never written; only rows beyond the image are cleared per band.
    """

    def __init__(self, channels: int, rows: int, width: int, pads, dtype) -> None:
        self.buffer = buffers.empty((channels, rows, pads[1] + width + pads[3]), dtype)
        self.buffer.fill(0)  # a reused buffer holds old data
        self.pads = pads

    def fill(self, x: np.ndarray, first: int, count: int, transform=None) -> np.ndarray:
        """Rows ``first .. first+count`` (padded coordinates) of the padded ``x`` (C, H, W); ``x`` may
        have fewer channels than the buffer (the last block of a channel-blocked caller).

        ``transform`` (``frame.engine.passes.norm_conv``) maps the copied rows in place before the conv reads
        them (normalisation + SiLU of the conv's input, so that input never exists whole); the pads
        are zeroed after it, as the conv pads the transformed image."""
        c, h, w = x.shape
        top_pad, left = self.pads[0], self.pads[1]
        rows = self.buffer[:c, :count]
        top, bottom = max(first - top_pad, 0), min(first + count - top_pad, h)
        begin, end = top + top_pad - first, bottom + top_pad - first
        if bottom <= top:
            rows[:] = 0
            return rows
        rows[:, :begin] = 0
        rows[:, end:] = 0
        rows[:, begin:end, left:left + w] = x[:, top:bottom]
        if transform is not None:
            transform(rows[:, begin:end])
            rows[:, begin:end, :left] = 0
            rows[:, begin:end, left + w:] = 0
        return rows


# Floats per depthwise column block (channels x taps x positions): 2 MB. Smaller blocks stay in a
# smaller cache but cost numpy calls per block and tap; measured on 2 x86 cores over MobileNet-style
# layers (5x5 on 384x15x20, 3x3 on 16x240x320), 512K was 25-45 % faster than 128K and as fast as 1M.
COLUMN_BLOCK_ELEMENTS = 512 << 10
GROUPED_BAND_BYTES = 16 << 20  # column matrix per band of the grouped kernel


def _pad(x: np.ndarray, pads, extra_rows: int = 0) -> np.ndarray:
    """``x`` (N, C, H, W) zero-padded by [top, left, bottom, right] (a view of ``x`` if no padding)."""
    top, left, bottom, right = pads
    if not (top or left or bottom or right or extra_rows):
        return x
    n, c, h, w = x.shape
    padded = np.zeros((n, c, h + top + bottom + extra_rows, w + left + right), dtype=x.dtype)
    padded[:, :, top:top + h, left:left + w] = x
    return padded


def _tap_view(padded: np.ndarray, i: int, j: int, rows: slice, out_w: int, stride, dilation) -> np.ndarray:
    """The input positions tap (i, j) reads for output rows ``rows`` (all columns), as a strided view."""
    (sh, sw), (dh, dw) = stride, dilation
    first = rows.start * sh + i * dh
    last = (rows.stop - 1) * sh + i * dh + 1
    return padded[..., first:last:sh, j * dw:j * dw + (out_w - 1) * sw + 1:sw]


def _flat_geometry(h: int, w: int, kernel, stride: int, dilation, pads, out_h: int) -> tuple[int, int]:
    """(padded width, extra zero rows) so that every tap's flat view stays inside the padded buffer."""
    (kh, kw), (dh, dw) = kernel, dilation
    width = w + pads[1] + pads[3]
    rows = h + pads[0] + pads[2]
    needed = (kh - 1) * dh * width + (kw - 1) * dw + stride * (out_h * width - 1) + 1
    return width, max(0, -(-(needed - rows * width) // width))


def _depthwise_flat(flat, taps, target, channels: slice, first: int, count: int, geometry) -> None:
    """Output positions ``first .. first+count`` (flat, row pitch ``width``) of ``channels``.

    ``flat`` is (C, padded length), ``taps`` (C, mult, kh·kw), ``target`` (C, mult, positions).
    Output position q reads padded position ``offset(tap) + stride * q``: one strided 1-D view per
    tap, copied into a (channels, taps, positions) block that one batched matrix-vector product
    reduces. That is one pass per tap plus one read, half the passes of a multiply and an add per tap
    (measured 1.7 vs 3.0 ms for 5×5 taps over 384 channels of 15×20), and numpy's inner loops run
    over whole rows of the block instead of one 20-pixel output row at a time.
    """
    offsets, stride = geometry
    source = flat[channels]
    columns = np.empty((source.shape[0], len(offsets), count), dtype=np.float32)
    for t, offset in enumerate(offsets):
        start = offset + stride * first
        columns[:, t] = source[:, start:start + stride * (count - 1) + 1:stride]
    np.matmul(taps[channels], columns, out=target[channels, :, first:first + count])


def depthwise_conv2d(x: np.ndarray, w: np.ndarray, stride, dilation, pads, out: np.ndarray) -> None:
    """x (N, C, H, W), w (C·mult, 1, kh, kw) float32 -> out (N, C·mult, Ho, Wo), bias not added.

    Computed on the padded image's flat layout with a row pitch of the padded width (the columns
    past ``Wo`` are scratch, cropped at the end). With unequal strides the pitch trick does not
    apply; each tap then reads a 2-D strided view.
    """
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    mult = m // c
    ho, wo = out.shape[2:]
    if stride[0] != stride[1]:
        return _depthwise_views(x, np.ascontiguousarray(w.reshape(c, mult, kh, kw)), stride, dilation, pads, out)
    taps = np.ascontiguousarray(w.reshape(c, mult, kh * kw))
    width, extra = _flat_geometry(h, wd, (kh, kw), stride[0], dilation, pads, ho)
    padded = _pad(x, pads, extra)
    offsets = [i * dilation[0] * width + j * dilation[1] for i in range(kh) for j in range(kw)]
    positions = ho * width
    per_channel = kh * kw * positions
    channels_per_block = max(1, COLUMN_BLOCK_ELEMENTS // per_channel)
    span = positions if channels_per_block > 1 else max(1, COLUMN_BLOCK_ELEMENTS // (kh * kw))
    blocks = [(slice(c0, min(c0 + channels_per_block, c)), q0, min(span, positions - q0))
              for c0 in range(0, c, channels_per_block) for q0 in range(0, positions, span)]
    result = np.empty((c, mult, positions), dtype=np.float32)
    for b in range(n):
        flat = padded[b].reshape(c, -1)

        def run(share, flat=flat):
            for channels, first, count in share:
                _depthwise_flat(flat, taps, result, channels, first, count, (offsets, stride[0]))

        _in_parallel(run, blocks, result.nbytes)
        out[b] = result.reshape(m, ho, width)[:, :, :wo]


def _in_parallel(run, blocks: list, nbytes: int) -> None:
    """``run(blocks)`` here, or shares of the blocks on the core pool when the layer is big enough."""
    count = min(workers(), len(blocks))
    if nbytes < MIN_PARALLEL_BYTES or count < 2:
        run(blocks)
        return
    share = -(-len(blocks) // count)
    run_tasks([lambda k=k: run(blocks[k:k + share]) for k in range(0, len(blocks), share)])


def _depthwise_views(x: np.ndarray, taps: np.ndarray, stride, dilation, pads, out: np.ndarray) -> None:
    """Depthwise by 2-D strided tap views, for unequal strides."""
    n, c = x.shape[:2]
    _, mult, kh, kw = taps.shape
    (sh, sw), (dh, dw) = stride, dilation
    ho, wo = out.shape[2:]
    padded = _pad(x, pads)
    for b in range(n):
        target = out[b].reshape(c, mult, ho, wo)
        scratch = np.empty_like(target)
        for i in range(kh):
            for j in range(kw):
                view = padded[b, :, i * dh:i * dh + (ho - 1) * sh + 1:sh, j * dw:j * dw + (wo - 1) * sw + 1:sw]
                weight = taps[:, :, i, j][:, :, None, None]
                if i == j == 0:
                    np.multiply(view[:, None], weight, out=target)
                else:
                    np.multiply(view[:, None], weight, out=scratch)
                    target += scratch


def grouped_conv2d(x: np.ndarray, w: np.ndarray, group: int, stride, dilation, pads, out: np.ndarray) -> None:
    """x (N, C, H, W), w (M, C/G, kh, kw) float32 -> out (N, M, Ho, Wo): one batched GEMM per band."""
    n, c = x.shape[:2]
    m, cg, kh, kw = w.shape
    ho, wo = out.shape[2:]
    depth = cg * kh * kw
    kernels = np.ascontiguousarray(w).reshape(group, m // group, depth)
    rows = max(1, min(ho, GROUPED_BAND_BYTES // (c * kh * kw * wo * 4)))
    padded = _pad(x, pads)
    columns = np.empty((c, kh, kw, rows * wo), dtype=np.float32)
    for b in range(n):
        for r0 in range(0, ho, rows):
            count = min(rows, ho - r0)
            band = columns[..., :count * wo].reshape(c, kh, kw, count, wo)
            for i in range(kh):
                for j in range(kw):
                    band[:, i, j] = _tap_view(padded[b], i, j, slice(r0, r0 + count), wo, stride, dilation)
            stacked = band.reshape(group, depth, count * wo) if count == rows else \
                np.ascontiguousarray(band).reshape(group, depth, count * wo)
            target = out[b, :, r0:r0 + count].reshape(group, m // group, count * wo)
            matmul_into(kernels, stacked, target)


# A dense stride-1 conv whose input has at least this many times the output's channels runs as one
# GEMM per band over the *input* rows (``narrow_conv2d``): im2col would copy kh·kw times the wide
# input, the tap sums copy kh·kw times the narrow output. Measured on 2 cores: 96 -> 24 channels,
# 3x3 at 120x160, 24 ms instead of 47 ms; at C = M (16, 32, 64, 128 channels) im2col stayed faster.
NARROW_RATIO = 4
NARROW_BAND_BYTES = 8 << 20


def narrow_conv2d(x: np.ndarray, w: np.ndarray, dilation, pads, out: np.ndarray) -> None:
    """x (N, C, H, W), w (M, C, kh, kw) float32, stride 1 -> out (N, M, Ho, Wo), bias not added.

    Per band of output rows: ``Y = W_taps (kh·kw·M, C) @ X (C, rows·Wp)`` on the padded input's flat
    rows (a view, no copy), then each tap's block of Y, shifted by the tap's offset, is summed into
    the output rows.
    """
    n = x.shape[0]
    m, c, kh, kw = w.shape
    ho, wo = out.shape[2:]
    dh, dw = dilation
    width, extra = _flat_geometry(x.shape[2], x.shape[3], (kh, kw), 1, dilation, pads, ho)
    padded = _pad(x, pads, extra)
    taps = np.ascontiguousarray(w.transpose(2, 3, 0, 1)).reshape(kh * kw * m, c)
    halo = (kh - 1) * dh + 1
    rows = max(1, min(ho, NARROW_BAND_BYTES // (4 * kh * kw * m * width) - halo + 1))
    for b in range(n):
        flat = padded[b].reshape(c, -1)
        for r0 in range(0, ho, rows):
            count = min(rows, ho - r0)
            span = count + halo - 1
            source = flat[:, r0 * width:(r0 + span) * width + (kw - 1) * dw]
            products = matmul_into(taps, source, np.empty((taps.shape[0], source.shape[1]), np.float32))
            products = products.reshape(kh, kw, m, -1)
            target = out[b, :, r0:r0 + count]
            first = True
            for i in range(kh):
                for j in range(kw):
                    start = i * dh * width + j * dw
                    shifted = products[i, j, :, start:start + count * width].reshape(m, count, width)[:, :, :wo]
                    if first:
                        np.copyto(target, shifted)
                        first = False
                    else:
                        target += shifted


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
