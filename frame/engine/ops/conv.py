"""Conv and ConvTranspose (1-D and 2-D, any strides, dilations, pads, auto_pad) on BLAS.

Depthwise and grouped convs and 3-D ones run in ``conv_im2col``; this module keeps the
dense 1-D/2-D kernel that the Stable Diffusion UNet and VAE spend their time in. Dense 3x3 stride-1
convs over at least 64 output tiles run as Winograd F(4x4, 3x3) or F(2x2, 3x3) (``conv_winograd``: 4x
or 2.25x fewer multiply-adds, within the same ``COLUMN_BUDGET_BYTES`` of temporaries) where its
layouts fit the budget; everything else as the banded im2col below.

Why not plain im2col: for a 3x3 conv it materialises 9 copies of the input (47 MB for 320x64x64,
2.4 GB for the VAE's 256x512x512), too much for a Pi Zero's 512 MB. Here im2col runs in bands of output
rows: each band's column matrix (C*kh*kw, rows*Wo) feeds one GEMM whose result lands directly in the
output rows. Bands aim at ``BAND_COLUMNS`` output pixels, because OpenBLAS's efficiency (above all with
two threads) depends on the GEMM's column count far more than on the copies, and are capped at
``COLUMN_BUDGET_BYTES``. Measured against one GEMM per kernel tap on a zero-copy shifted view of the
padded rows (no column copies at all), the banded form is as fast with one BLAS thread and faster with
two, because BLAS gets one long reduction (K = 9*C) instead of nine short ones (K = C) plus eight
output-sized additions; for 8x8 latents at 1280 channels it is two to four times as fast.

Memory beyond input and output: one column band (at most ``COLUMN_BUDGET_BYTES``) and a reused
buffer of the padded input rows it reads (the image is never padded as a whole). 1x1 convs without
stride or padding are a single GEMM on the input itself. Dtypes: fp16 input or weights are widened to
float32 per call; the result is fp16 only if all float operands were fp16.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np

from frame.engine import buffers
from frame.engine.ops import conv_winograd
from frame.engine.ops.blocks import gemm_pieces, matmul_into, run_tasks
from frame.engine.ops.conv_im2col import (
    NARROW_RATIO,
    PaddedRows,
    conv_nd,
    conv_transpose_nd,
    conv_transpose_work,
    conv_work,
    depthwise_conv2d,
    grouped_conv2d,
    narrow_conv2d,
    spatial_params,
)
from frame.engine.ops.cost import FLOAT, Cost, CostQuery, Shape, has_dims
from frame.engine.ops.linalg import float32_operands
from frame.engine.ops.registry import UnsupportedOp, register

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def validate_conv(attrs: dict) -> None:
    """Load-time check shared by Conv, ConvTranspose and pooling: 1-D to 3-D, known auto_pad (3-D runs
    in ``conv_im2col.conv_nd``)."""
    if attrs.get("auto_pad", "NOTSET") not in _AUTO_PADS:
        raise UnsupportedOp(f"attribute 'auto_pad' = {attrs['auto_pad']!r} (expected one of {_AUTO_PADS})")
    for name in ("kernel_shape", "strides", "dilations"):
        if name in attrs and len(attrs[name]) not in (1, 2, 3):
            raise UnsupportedOp(f"attribute {name!r} = {attrs[name]}: only 1-D, 2-D and 3-D are supported")


def _as_2d(x: np.ndarray, w: np.ndarray, strides, dilations, pads):
    """1-D convs run as 2-D convs with a height of 1."""
    if x.ndim == 3:
        return x[:, :, None, :], w[:, :, None, :], [1, *strides], [1, *dilations], [0, pads[0], 0, pads[1]]
    if x.ndim != 4:
        raise ValueError(f"Conv supports 1-D and 2-D inputs (rank 3 or 4), got shape {x.shape}")
    return x, w, strides, dilations, pads


# Band size, by measurement on 2 shared cores with 2 OpenBLAS threads (benchmarks/conv_kernel.py,
# docs/benchmarks-conv.md): under load the GEMM's efficiency depends on its column count N far more
# than on the copies (on a quiet machine band size barely matters). 3x3 640->320 at 64x64: N~730
# (16 MB bands) costs 2.5x the CPU of N~2900; 256->256 at 256x256: N~1800 costs 2x N~15000. So a
# band aims at BAND_COLUMNS output pixels (or the whole image) and is capped at COLUMN_BUDGET_BYTES,
# which bounds the extra memory of any conv: the largest SD column matrix would be 94 MB (UNet) or
# 2.4 GB (VAE). 32 MB (not 64) keeps a full 512x512 SD 1.5 render under 300 MB peak (289 vs 321 MB,
# benchmarks/sd_memory.py); the wider bands gained little outside heavy load.
BAND_COLUMNS = 16384
COLUMN_BUDGET_BYTES = 32 << 20


def band_rows(out_hw: tuple[int, int], depth: int, pieces: int = 1) -> int:
    """Output rows per band: about BAND_COLUMNS pixels, the bands of all ``pieces`` (threads) together
    within the byte budget, heights balanced, and a band count that ``pieces`` divides (when there are
    enough rows) so every thread gets the same work."""
    ho, wo = out_hw
    rows = min(ho, -(-BAND_COLUMNS // wo), COLUMN_BUDGET_BYTES // (pieces * depth * wo * 4))
    rows = max(1, rows)
    bands = -(-ho // rows)
    if pieces > 1 and ho >= pieces:
        bands = -(-bands // pieces) * pieces
    return -(-ho // bands)  # heights balanced so the last band is not a sliver


def _conv_image(x: np.ndarray, weight: np.ndarray, group: int, stride, dilation, pads, out_hw,
                out: np.ndarray, transform=None) -> None:
    """One image: x (C, H, W) float32, weight (M, C/group, kh, kw) -> out (M, Ho, Wo), by row bands
    (``transform``: see ``PaddedRows.fill``; group 1 only).

    With several cores (``blocks.gemm_pieces``) the bands are shared out: each thread copies its own
    bands' columns and runs their GEMMs on one BLAS thread, so the copies run in parallel as well.
    An image with fewer bands than threads splits each band's GEMM instead.
    """
    m, cg, kh, kw = weight.shape
    ho, wo = out_hw
    mg, depth = m // group, cg * kh * kw
    pieces = gemm_pieces(m * depth * ho * wo)
    rows = band_rows(out_hw, depth, pieces)
    bands = [(g, r0) for g in range(group) for r0 in range(0, ho, rows)]
    shares = pieces if len(bands) >= pieces else 1
    size = -(-len(bands) // shares)

    def run(share: list[tuple[int, int]]) -> None:
        column_buffer = buffers.empty(depth * rows * wo, np.float32)
        padded = PaddedRows(cg, (rows - 1) * stride[0] + (kh - 1) * dilation[0] + 1, x.shape[2], pads, np.float32)
        for g, r0 in share:
            count = min(rows, ho - r0)
            columns = _band_columns(x[g * cg:(g + 1) * cg], padded, column_buffer, (kh, kw), stride, dilation,
                                    r0, count, wo, transform)
            kernel = weight[g * mg:(g + 1) * mg].reshape(mg, depth)
            target = out[g * mg:(g + 1) * mg, r0:r0 + count].reshape(mg, count * wo)
            if shares > 1:
                np.matmul(kernel, columns, out=target)
            else:
                matmul_into(kernel, columns, target)

    run_tasks([lambda s=s: run(bands[s:s + size]) for s in range(0, len(bands), size)])


def dense_conv_image(x: np.ndarray, weight: np.ndarray, stride, dilation, pads, out_hw, out: np.ndarray,
                     transform=None) -> None:
    """One image of a dense (group 1) conv: x (C, H, W), contiguous weight (M, C, kh, kw) float32 ->
    out (M, Ho, Wo), bias not added. 3x3 stride-1 convs run as Winograd (F(4x4) or F(2x2), 3x3) when
    a layout fits, the rest as the banded im2col. ``transform`` maps each band of copied input rows in place
    before the conv reads it (``passes.norm_conv``: GroupNorm + SiLU of the input), in both paths."""
    m, c, kh, kw = weight.shape
    ho, wo = out_hw
    if (kh, kw) == (3, 3) and list(stride) == [1, 1] and list(dilation) == [1, 1]:  # Winograd
        layout = winograd_layout(c, m, out_hw, gemm_pieces(m * c * 9 * ho * wo))
        if layout is not None:
            conv_winograd.winograd_conv3x3(x, weight, pads, out, layout, transform)
            return
    _conv_image(x, weight, 1, stride, dilation, pads, out_hw, out, transform)


def winograd_layout(channels: int, outputs: int, out_hw: tuple[int, int], pieces: int) -> conv_winograd.Plan | None:
    """The Winograd layout ``dense_conv_image`` runs a 3x3 stride-1 conv with (None: im2col), also
    for the plan's memory count (``conv_image_scratch``). The budget: never more temporary
    memory than im2col would take for this conv (its whole column matrix, or the budget), so a small
    image's Winograd does not raise the step's peak."""
    budget = min(COLUMN_BUDGET_BYTES, channels * 9 * out_hw[0] * out_hw[1] * 4)
    return conv_winograd.plan(channels, outputs, out_hw, budget, pieces)


def _band_columns(x: np.ndarray, padded: PaddedRows, buffer: np.ndarray, kernel, stride, dilation, r0: int,
                  count: int, wo: int, transform=None) -> np.ndarray:
    """The im2col matrix (C·kh·kw, count·wo) of output rows ``r0 .. r0+count``, in ``buffer``."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    cg = x.shape[0]
    span = (count - 1) * sh + (kh - 1) * dh + 1  # padded input rows this band reads
    source = padded.fill(x, r0 * sh, span, transform)
    columns = buffer[:cg * kh * kw * count * wo].reshape(cg, kh, kw, count, wo)  # contiguous, even when short
    for i in range(kh):
        for j in range(kw):
            columns[:, i, j] = source[:, i * dh:i * dh + (count - 1) * sh + 1:sh, j * dw:j * dw + (wo - 1) * sw + 1:sw]
    return columns.reshape(cg * kh * kw, count * wo)


def conv_image_scratch(x: Shape, w: Shape, out: Shape, attrs: Mapping) -> int:
    """Temporary bytes of one dense 2-D conv image (``dense_conv_image``): a 3×3 stride-1 conv's
    Winograd layout where ``winograd_layout`` picks one (``conv_winograd.scratch_bytes``), else one
    im2col band of ``band_rows`` output rows (``C/g·kh·kw × rows·Wo`` float32) plus the padded input
    rows it reads; a 1×1 conv without stride or padding is one GEMM on the input itself (nothing).
    Counted for one thread (``pieces`` 1): the threaded layouts share the same budget."""
    if len(x) != 4 or len(w) != 4 or len(out) != 4:
        return 0
    group = int(attrs.get("group", 1) or 1)
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    m, cg, kh, kw = w
    if (kh, kw) == (1, 1) and strides == [1, 1] and not any(pads):
        return 0
    ho, wo = out[2], out[3]
    if group == 1 and (kh, kw) == (3, 3) and strides == [1, 1] and dilations == [1, 1]:
        layout = winograd_layout(cg, m, (ho, wo), 1)  # type: ignore[arg-type]
        if layout is not None:
            return conv_winograd.scratch_bytes(layout, cg, m, (ho, wo))  # type: ignore[arg-type]
    depth = cg * kh * kw  # type: ignore[operator]
    rows = band_rows((ho, wo), depth)  # type: ignore[arg-type]
    span = (rows - 1) * strides[0] + (kh - 1) * dilations[0] + 1  # type: ignore[operator]
    padded = (x[1] // group) * span * (pads[1] + x[3] + pads[3])  # type: ignore[operator]
    return (depth * rows * wo + padded) * FLOAT  # type: ignore[operator]


def conv_scratch(query: CostQuery, attrs: Mapping | None = None) -> int:
    """A Conv step's temporaries (``conv_image_scratch`` of its shapes; ``attrs``: the conv's own
    attributes where a fused op carries them apart from its node's)."""
    x, w, out = query.shape(0), query.shape(1), query.out()
    if len(query.inputs) < 2 or not (has_dims(x) and has_dims(w) and has_dims(out)):
        return 0
    return conv_image_scratch(x, w, out, query.attrs if attrs is None else attrs)  # type: ignore[arg-type]


@register("Conv", 1, validate=validate_conv, cost=Cost(work=conv_work, scratch=conv_scratch))
def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, /, *, auto_pad: str = "NOTSET",
         dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None,
         pads: list[int] | None = None, strides: list[int] | None = None,
         _full_channels: int | None = None) -> np.ndarray:
    """``_full_channels``: the whole weight's output channels when ``w`` is one block of them
    (``weight_decoding``), so the block runs the algorithm the whole conv would."""
    (x32, w32, b32), dtype = float32_operands(x, w, b)
    strides, dilations, pads = spatial_params(w.shape[2:], x.shape[2:], strides, dilations, pads, auto_pad)
    if x.ndim == 5:  # 3-D: plain im2col (ops.conv_im2col)
        out = conv_nd(x32, w32, group, strides, dilations, pads)
        if b32 is not None:
            out += b32.reshape(1, -1, 1, 1, 1)
        return out.astype(dtype, copy=False)
    x32, w32, strides, dilations, pads = _as_2d(x32, w32, strides, dilations, pads)
    n, c, h, wd = x32.shape
    m, cg, kh, kw = w32.shape
    if c != cg * group or m % group:
        raise ValueError(f"Conv: input has {c} channels, weight {w.shape} with group={group} expects {cg * group}")
    ho = (h + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    wo = (wd + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    if ho <= 0 or wo <= 0:
        raise ValueError(f"Conv: kernel {w.shape[2:]} (dilations {dilations}) is larger than the padded input "
                         f"{x.shape[2:]} (pads {pads})")
    out = buffers.empty((n, m, ho, wo), np.float32)
    if kh == kw == 1 and group == 1 and strides == [1, 1] and not any(pads):
        for i in range(n):
            matmul_into(w32.reshape(m, c), x32[i].reshape(c, h * wd), out[i].reshape(m, h * wd))
    elif group > 1:  # depthwise and grouped convs: ops.conv_im2col (no per-group GEMM loop)
        kernel = depthwise_conv2d if cg == 1 else partial(grouped_conv2d, group=group)
        kernel(x32, w32, stride=strides, dilation=dilations, pads=pads, out=out)
    elif strides == [1, 1] and kh * kw > 1 and c >= NARROW_RATIO * (_full_channels or m):  # e.g. 96 -> 24
        narrow_conv2d(x32, w32, dilation=dilations, pads=pads, out=out)
    else:
        w32 = np.ascontiguousarray(w32)
        for i in range(n):
            dense_conv_image(x32[i], w32, strides, dilations, pads, (ho, wo), out[i])
    if b32 is not None:
        out += b32.reshape(1, m, 1, 1)
    if x.ndim == 3:
        out = out[:, :, 0, :]
    return out.astype(dtype, copy=False)


# Which upsampled rows (columns) each tap of a 3x3 kernel reads, per output phase, as source offsets
# -1/0 (phase 0: rows 2i-1, 2i, 2i+1 = source rows i-1, i, i) or 0/+1 (phase 1: rows 2i, 2i+1, 2i+2 =
# source rows i, i, i+1): _TAP_TO_SOURCE[phase][source_offset, tap].
_TAP_TO_SOURCE = (np.array([[1, 0, 0], [0, 1, 1]], np.float32), np.array([[1, 1, 0], [0, 0, 1]], np.float32))

# Below this many input pixels the four phase convs are narrow GEMMs and the per-call weight summing
# (a pass over the weights) outweighs the saved multiply-adds: measured 1280 channels at 16x16 input
# 0.53 s fused vs 0.33 s upsample + conv; 640 channels at 32x32 0.30 s vs 0.42 s.
FUSED_MIN_INPUT_PIXELS = 1024


def _phase_kernel(w: np.ndarray, row_phase: int, col_phase: int) -> np.ndarray:
    """The 2x2 kernel (M, C, 2, 2) one output phase of a 3x3 conv on a nearest-x2 image applies to the
    small image: the taps reading the same source pixel summed (one skinny GEMM over the weights)."""
    m, c = w.shape[:2]
    combine = np.einsum("pi,qj->ijpq", _TAP_TO_SOURCE[row_phase], _TAP_TO_SOURCE[col_phase]).reshape(9, 4)
    return (w.reshape(m * c, 9) @ combine).reshape(m, c, 2, 2)


def upsample2x_conv3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, group: int = 1) -> np.ndarray:
    """``Conv(kernel 3x3, pads 1, stride 1)`` applied to ``x`` upsampled x2 by nearest neighbour.

    The upsampler conv of every VAE decoder up block (and of the UNet's up blocks). Each of the four
    output phases (even/odd row, even/odd column) is a 2x2 conv of the *small* image with summed taps,
    so the 4x larger upsampled tensor never exists and the conv does 4/9 of the multiply-adds.
    Small images (< ``FUSED_MIN_INPUT_PIXELS``) are upsampled and convolved plainly, which is faster there.
    Extra memory: one phase of the output (a quarter of it), one conv's band and the summed taps of one
    phase (4/9 of the weight). For a runtime that
    fuses ``Resize(nearest, x2)`` -> ``Conv(3x3, pads 1)`` when the Resize output has no other consumer
    (Resize modes whose x2 mapping is source index = output index // 2: asymmetric/floor, half_pixel).
    """
    (x32, w32, b32), dtype = float32_operands(x, w, b)
    if x32.ndim != 4 or w32.shape[2:] != (3, 3) or x32.shape[1] != w32.shape[1] * group or w32.shape[0] % group:
        raise ValueError(f"upsample2x_conv3x3: needs NCHW input and a 3x3 weight with group={group}, got input "
                         f"{x.shape} and weight {w.shape}")
    n, _, h, wd = x32.shape
    m = w32.shape[0]
    if h * wd < FUSED_MIN_INPUT_PIXELS:
        upsampled = x32.repeat(2, axis=2).repeat(2, axis=3)
        return conv(upsampled, w32, b32, group=group, pads=[1, 1, 1, 1]).astype(dtype, copy=False)
    w32 = np.ascontiguousarray(w32)
    out = buffers.empty((n, m, 2 * h, 2 * wd), np.float32)
    phase_out = buffers.empty((m, h, wd), np.float32)
    for row_phase in (0, 1):
        for col_phase in (0, 1):
            kernel = _phase_kernel(w32, row_phase, col_phase)
            pads = [1 - row_phase, 1 - col_phase, row_phase, col_phase]
            for i in range(n):
                _conv_image(x32[i], kernel, group, (1, 1), (1, 1), pads, (h, wd), phase_out)
                out[i, :, row_phase::2, col_phase::2] = phase_out
    if b32 is not None:
        out += b32.reshape(1, m, 1, 1)
    return out.astype(dtype, copy=False)


def _transpose_pads(in_hw, kernel, strides, dilations, pads, output_padding, output_shape, auto_pad):
    """Begin/end pads of ConvTranspose, derived from ``output_shape`` or auto_pad when given."""
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [size * s for size, s in zip(in_hw, strides)]
    if output_shape is None:
        return list(pads or [0] * 4)
    begins, ends = [], []
    for size, k, s, d, extra, want in zip(in_hw, kernel, strides, dilations, output_padding, output_shape[-2:]):
        total = s * (size - 1) + extra + (k - 1) * d + 1 - want  # negative: zeros appended to reach want
        if auto_pad == "SAME_UPPER":
            begins.append(total // 2)
            ends.append(total - total // 2)
        else:
            begins.append(total - total // 2)
            ends.append(total // 2)
    return begins + ends


@register("ConvTranspose", 1, validate=validate_conv, cost=Cost(work=conv_transpose_work))
def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, /, *, auto_pad: str = "NOTSET",
                   dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None,
                   output_padding: list[int] | None = None, output_shape: list[int] | None = None,
                   pads: list[int] | None = None, strides: list[int] | None = None) -> np.ndarray:
    """Scatter form: each tap's GEMM result is added into a strided view of the full output."""
    (x32, w32, b32), dtype = float32_operands(x, w, b)
    if x.ndim not in (3, 4, 5) or w.ndim != x.ndim:
        raise ValueError(f"ConvTranspose supports 1-D to 3-D inputs, got input {x.shape} and weight {w.shape}")
    rank = w.ndim - 2
    strides, dilations = list(strides or [1] * rank), list(dilations or [1] * rank)
    output_padding = list(output_padding or [0] * rank)
    if x.ndim == 5:
        out = conv_transpose_nd(x32, w32, group, strides, dilations, pads, output_padding, output_shape, auto_pad)
        if b32 is not None:
            out += b32.reshape(1, -1, 1, 1, 1)
        return out.astype(dtype, copy=False)
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
    if min(pads) < 0:  # output_shape asks for more than the full result: extend it with zeros
        extend = [(max(-pads[0], 0), max(-pads[2], 0)), (max(-pads[1], 0), max(-pads[3], 0))]
        full = np.pad(full, [(0, 0), (0, 0), *extend])
        full_h, full_w = full.shape[2:]
        pads = [max(p, 0) for p in pads]
    out = np.ascontiguousarray(full[:, :, pads[0]:full_h - pads[2], pads[1]:full_w - pads[3]])  # copies only a crop
    if b32 is not None:
        out += b32.reshape(1, -1, 1, 1)
    if x.ndim == 3:
        out = out[:, :, 0, :]
    return out.astype(dtype, copy=False)
