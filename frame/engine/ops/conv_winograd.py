"""Dense 3×3 stride-1 convolutions by Winograd's F(2×2, 3×3): 2.25× fewer multiply-adds than im2col.

Each 2×2 block of output pixels is computed from the 4×4 input tile around it as
``Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`` (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
2016): summed over input channels, the element-wise product of the 16 transformed values becomes
16 GEMMs ``U[ξ] (M × C) @ V[ξ] (C × tiles)`` — 16 multiply-adds per 4 output pixels and input
channel instead of 36. The transforms only add and subtract (and halve, for the weight), so the
result is as exact as the direct sum (max error ~2e-7 of the output scale against float64, im2col
~4e-7).

Measured on one core (AVX2 BLAS, benchmarks/engine_profile.py): 320 → 320 channels at 64×64
77 → 45 ms. Extra memory stays within ``budget`` bytes, in one of two layouts (``plan``):

* **chunks** (small images, where the transformed input V of the whole image is small): V once,
  then the output channels in chunks, each chunk's transformed weight U made just before its GEMMs
  (while it is still in cache) — the 1280-channel convs at 16×16, whose whole U would be 105 MB;
* **bands** (large images with small weights): the whole U once, then bands of tile rows, each
  with its own V and GEMM result — the 320-channel convs at 64×64.

Neither fits for a few big convs at large sizes (960 → 320 at 64×64): those run as im2col.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from frame.engine import buffers
from frame.engine.ops.blocks import gemm_pieces, matmul_into, run_tasks
from frame.engine.ops.padded_rows import PaddedRows

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
# the weight transform as one product: Kᵀ (16, 9) @ gᵀ (9, M·C) gives every G g Gᵀ, already laid out
_WEIGHT_TRANSFORM_T = np.ascontiguousarray(np.einsum("ai,bj->abij", _G, _G).reshape(16, 9)).astype(np.float32)

MIN_TILES = 64  # 2×2 output tiles: an 8×8 image (16 tiles) gains too little for the weight transform
MIN_CHANNELS = 16  # the SD UNet's conv_in (4 input channels) gains nothing
CHUNK_WEIGHT_BYTES = 4 << 20  # transformed weight per chunk: stays in cache until its GEMMs read it
MIN_CHUNK = 64  # output channels per chunk: fewer make the GEMMs too flat (32: 118 vs 95 ms at 640->320, 64x64)
MIN_BAND_TILES = 64  # tiles per band's GEMM (its N): 2 tile rows of a 64-wide image still beat im2col by 1.5x
CHANNEL_BLOCK = 64  # input channels transformed at a time in the chunk layout


@dataclass(frozen=True)
class Plan:
    """``tile_rows`` per band, ``chunk`` output channels per transformed-weight chunk (chunk < M: the
    chunk layout, one band of all tile rows) and ``threads`` sharing the bands or chunks (1: the
    threads split each GEMM instead)."""

    tile_rows: int
    chunk: int
    threads: int = 1


def _chunk_plan(channels: int, outputs: int, tiles: tuple[int, int], budget: int, pieces: int) -> Plan | None:
    th, tw = tiles
    whole_v = 4 * (16 * channels * th * tw + 5 * min(channels, CHANNEL_BLOCK) * (2 * th + 2) * (2 * tw + 2))
    per_output = 4 * 16 * (channels + th * tw)  # one output channel's U row and GEMM result row
    if outputs < 2 * MIN_CHUNK or whole_v >= budget:
        return None
    for threads in sorted({pieces, 1}, reverse=True):
        chunk = min(max(MIN_CHUNK, CHUNK_WEIGHT_BYTES // (4 * 16 * channels)),
                    (budget - whole_v) // (threads * per_output), -(-outputs // threads))
        if chunk >= MIN_CHUNK:
            return Plan(th, int(chunk), threads)
    return None


def _band_plan(channels: int, outputs: int, tiles: tuple[int, int], budget: int, pieces: int) -> Plan | None:
    th, tw = tiles
    u_bytes = 16 * outputs * channels * 4
    per_row = 4 * tw * (16 * channels + 16 * outputs + 12 * channels)  # V, GEMM result, padded rows, scratch
    for threads in sorted({pieces, 1}, reverse=True):
        rows = min(th, (budget - u_bytes) // (threads * per_row)) if u_bytes < budget else 0
        if rows * tw >= min(MIN_BAND_TILES, th * tw) and (threads == 1 or th >= 2 * threads):
            bands = -(-th // rows)
            bands = -(-bands // threads) * threads  # every thread gets as many bands
            return Plan(-(-th // bands), outputs, threads)
    return None


def plan(channels: int, outputs: int, out_hw: tuple[int, int], budget: int, pieces: int) -> Plan | None:
    """Layout within ``budget`` bytes of temporaries for ``pieces`` threads, or None (use im2col).

    Chunks are preferred (each chunk's U is made while the cache holds it); then bands; each first with
    a share per thread, else with all threads on every GEMM (less memory: one band or chunk at a time).
    """
    tiles = -(-out_hw[0] // 2), -(-out_hw[1] // 2)
    if tiles[0] * tiles[1] < MIN_TILES or channels < MIN_CHANNELS:
        return None
    return _chunk_plan(channels, outputs, tiles, budget, pieces) or _band_plan(channels, outputs, tiles, budget,
                                                                                pieces)


def scratch_bytes(layout: Plan, channels: int, outputs: int, out_hw: tuple[int, int]) -> int:
    """Peak temporary bytes of ``winograd_conv3x3`` with ``layout`` (output and input not counted), as
    ``_by_bands`` and ``_by_chunks`` allocate them; the estimate's memory model counts this
    (``frame.estimate.scratch``).

    bands: the whole U, then per thread the padded input rows, the row-transform scratch, V and the
    GEMM result of one band. chunks: V of the whole image beside one channel block's padded rows and
    row-transform scratch while the input is transformed; then V, the padded rows (the last
    ``source`` view keeps them) and each thread's U chunk and GEMM result."""
    th, tw = -(-out_hw[0] // 2), -(-out_hw[1] // 2)
    width = 2 * tw + 2  # the padded columns (``winograd_conv3x3`` pads right up to whole tiles)
    if layout.chunk >= outputs:
        rows = layout.tile_rows
        band = channels * (2 * rows + 2) * width + 4 * channels * rows * width + 16 * rows * tw * (channels + outputs)
        return 4 * (16 * outputs * channels + layout.threads * band)
    block = min(channels, CHANNEL_BLOCK)
    v, padded = 16 * channels * th * tw, block * (2 * th + 2) * width
    chunks = layout.threads * 16 * layout.chunk * (th * tw + channels)
    return 4 * (v + padded + max(4 * block * th * width, chunks))


def transform_weight(w: np.ndarray, step: int = 1 << 15, out: np.ndarray | None = None) -> np.ndarray:
    """(M, C, 3, 3) float32 → U (16, M, C): U[4a + b] = (G g Gᵀ)[a, b], ``step`` filters per GEMM.

    ``out`` (at least 16·M·C floats) is used instead of a fresh array: the chunk layout makes one
    U per chunk, and a fresh 5 MB array each time is 5 MB of new pages for the kernel to zero."""
    m, c = w.shape[:2]
    flat = np.ascontiguousarray(w).reshape(m * c, 9)
    u = buffers.empty((16, m * c), np.float32) if out is None else _view(out[:16 * m * c], (16, m * c))
    for r0 in range(0, m * c, step):
        np.matmul(_WEIGHT_TRANSFORM_T, flat[r0:r0 + step].T, out=u[:, r0:r0 + step])
    return u.reshape(16, m, c)


def _view(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array.reshape(shape)`` that must not copy (kernels write through it)."""
    view = array.reshape(shape)
    if view.flags.owndata:
        raise AssertionError(f"reshape of {array.shape} to {shape} would copy")
    return view


def _transform_input(padded: np.ndarray, tiles: tuple[int, int], v: np.ndarray, rows: np.ndarray) -> None:
    """Bᵀ d B of every 4×4 tile (stride 2) of ``padded`` (C, 2·th+2, ≥ 2·tw+2) into v (16, C, th·tw).

    ``rows`` (4, C, th, width) is scratch for the transform along the rows.
    """
    th, tw = tiles
    c = padded.shape[0]
    d = [padded[:, i:i + 2 * th:2] for i in range(4)]  # (C, th, width) each
    np.subtract(d[0], d[2], out=rows[0])
    np.add(d[1], d[2], out=rows[1])
    np.subtract(d[2], d[1], out=rows[2])
    np.subtract(d[1], d[3], out=rows[3])
    for a in range(4):
        e = [rows[a][:, :, j:j + 2 * tw:2] for j in range(4)]  # (C, th, tw) each
        target = _view(v[4 * a:4 * a + 4], (4, c, th, tw))
        np.subtract(e[0], e[2], out=target[0])
        np.add(e[1], e[2], out=target[1])
        np.subtract(e[2], e[1], out=target[2])
        np.subtract(e[1], e[3], out=target[3])


def _transform_output(mo: np.ndarray, tiles: tuple[int, int], out: np.ndarray) -> None:
    """Aᵀ m A of every tile: mo (16, M, th·tw) (overwritten) → out (M, ≤ 2·th, ≤ 2·tw)."""
    th, tw = tiles
    t = _view(mo, (4, 4, mo.shape[1], th, tw))
    for b in range(4):  # along the rows: t[3, b] = m1b - m2b - m3b, then t[0, b] = m0b + m1b + m2b
        np.subtract(t[1, b], t[3, b], out=t[3, b])
        t[3, b] -= t[2, b]
        t[0, b] += t[1, b]
        t[0, b] += t[2, b]
    ho, wo = out.shape[1:]
    for i, row in enumerate((t[0], t[3])):
        rows = (ho - i + 1) // 2
        for j in range(2):
            cols = (wo - j + 1) // 2
            target = out[:, i::2, j::2]
            if j == 0:  # y = r0 + r1 + r2
                np.add(row[0][:, :rows, :cols], row[1][:, :rows, :cols], out=target)
                target += row[2][:, :rows, :cols]
            else:  # y = r1 - r2 - r3
                np.subtract(row[1][:, :rows, :cols], row[2][:, :rows, :cols], out=target)
                target -= row[3][:, :rows, :cols]


def winograd_conv3x3(x: np.ndarray, w: np.ndarray, pads, out: np.ndarray, layout: Plan, transform=None) -> None:
    """x (C, H, W), w (M, C, 3, 3) float32, stride 1 → out (M, Ho, Wo), bias not added.

    ``transform(rows, first_channel=0)`` maps the copied input rows in place before they are
    transformed (``PaddedRows.fill``; the GroupNorm + SiLU of ``passes.norm_conv``): ``rows`` holds
    channels ``first_channel ..`` of the image."""
    m, ho, wo = out.shape
    tiles = -(-ho // 2), -(-wo // 2)
    # pad right (and, through PaddedRows, bottom) up to whole tiles: 2·tw + 2 padded input columns
    full = [pads[0], pads[1], 0, 2 * tiles[1] + 2 - (x.shape[2] + pads[1])]
    threads = min(layout.threads, gemm_pieces(m * x.shape[0] * 4 * ho * wo))
    if layout.chunk >= m:
        _by_bands(x, w, full, tiles, out, layout.tile_rows, threads, transform)
    else:
        _by_chunks(x, w, full, tiles, out, layout.chunk, threads, transform)


def _by_bands(x: np.ndarray, w: np.ndarray, pads, tiles, out: np.ndarray, tile_rows: int, threads: int,
              transform=None) -> None:
    c, m = x.shape[0], w.shape[0]
    th, tw = tiles
    u = transform_weight(w)
    bands = list(range(0, th, tile_rows))
    shares = min(threads, len(bands))
    size = -(-len(bands) // shares)

    def run(share: list[int]) -> None:
        padded = PaddedRows(c, 2 * tile_rows + 2, x.shape[2], pads, np.float32)
        width = padded.buffer.shape[2]
        scratch = [buffers.empty(n, np.float32) for n in (4 * c * tile_rows * width, 16 * tile_rows * tw * (c + m))]
        for t0 in share:
            count = min(tile_rows, th - t0)
            rows = _view(scratch[0][:4 * c * count * width], (4, c, count, width))
            v = _view(scratch[1][:16 * c * count * tw], (16, c, count * tw))
            mo = _view(scratch[1][16 * c * count * tw:16 * (c + m) * count * tw], (16, m, count * tw))
            _transform_input(padded.fill(x, 2 * t0, 2 * count + 2, transform), (count, tw), v, rows)
            if shares > 1:  # the bands are shared out already: one BLAS thread each
                np.matmul(u, v, out=mo)
            else:
                matmul_into(u, v, mo)
            _transform_output(mo, (count, tw), out[:, 2 * t0:2 * t0 + 2 * count])

    run_tasks([lambda s=s: run(bands[s:s + size]) for s in range(0, len(bands), size)])


def _by_chunks(x: np.ndarray, w: np.ndarray, pads, tiles, out: np.ndarray, chunk: int, threads: int,
               transform=None) -> None:
    c, m = x.shape[0], w.shape[0]
    th, tw = tiles
    v = buffers.empty((16, c, th * tw), np.float32)
    block = min(c, CHANNEL_BLOCK)
    padded = PaddedRows(block, 2 * th + 2, x.shape[2], pads, np.float32)
    rows = buffers.empty((4, block, th, padded.buffer.shape[2]), np.float32)
    for c0 in range(0, c, block):
        c1 = min(c0 + block, c)
        block_transform = None if transform is None else partial(transform, first_channel=c0)
        source = padded.fill(x[c0:c1], 0, 2 * th + 2, block_transform)
        _transform_input(source, tiles, v[:, c0:c1], rows[:, :c1 - c0])
    del padded, rows
    chunks = list(range(0, m, chunk))
    shares = min(threads, len(chunks))
    size = -(-len(chunks) // shares)

    def run(share: list[int]) -> None:
        scratch = buffers.empty(16 * chunk * th * tw, np.float32)
        u_buffer = buffers.empty(16 * chunk * c, np.float32)
        for m0 in share:
            m1 = min(m0 + chunk, m)
            mo = _view(scratch[:16 * (m1 - m0) * th * tw], (16, m1 - m0, th * tw))
            u = transform_weight(w[m0:m1], out=u_buffer)
            if shares > 1:  # the chunks are shared out already: one BLAS thread each
                np.matmul(u, v, out=mo)
            else:
                matmul_into(u, v, mo)
            _transform_output(mo, tiles, out[m0:m1])

    run_tasks([lambda s=s: run(chunks[s:s + size]) for s in range(0, len(chunks), size)])
