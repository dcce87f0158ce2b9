"""Dense 3×3 stride-1 convolutions by Winograd's F(4×4, 3×3) or F(2×2, 3×3): 4× or 2.25× fewer
multiply-adds than im2col.

Each ``m × m`` block of output pixels (m = 4 or 2) is computed from the ``(m+2)²`` input tile
around it (the tile transforms below): summed over input channels, the element-wise product of the
transformed tile and weight becomes (m+2)² GEMMs ``U[ξ] (M × C) @ V[ξ] (C × tiles)`` — 36
multiply-adds per 16 output pixels and input channel for F(4×4), 16 per 4 for F(2×2), against 9
per pixel direct. F(4×4) is used where the GEMMs dominate (``plan``: enough output channels and
tiles); its transforms cost more per pixel, and its float32 error is larger: max error 4.9e-6 of the
output's scale against float64 (points 0, -1, 1, 1/2, -2; 512 → 128 channels at 64×64, weights
N(0, 0.02)), F(2×2) 5.5e-7, im2col 4e-7.

Measured on one core (AVX2 BLAS, benchmarks/engine_profile.py): 320 → 320 channels at 64×64
77 → 45 ms by F(2×2); docs/benchmarks-conv.md has F(4×4)'s figures. Extra memory stays within
``budget`` bytes, in one of two layouts (``plan``):

* **chunks** (small images, where the transformed input V of the whole image is small): V once,
  then the output channels in chunks, each chunk's transformed weight U made just before its GEMMs
  (while it is still in cache; with few tiles a band, 128 input channels at a time, ``weight_block``)
  — the 1280-channel convs at 16×16, whose whole U would be 105 MB;
* **bands** (large images with small weights): the whole U once, then bands of tile rows, each
  with its own V and GEMM result — the 320-channel convs at 64×64.

Neither fits for a few big convs at large sizes (960 → 320 at 64×64): those run as im2col.

The tile transforms of F(2×2, 3×3) and F(4×4, 3×3) come first in this module, the plans and GEMMs after them.

A tile of ``n × n`` input pixels (n = m + 2) gives ``m × m`` output pixels of a 3×3 correlation as
``Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`` (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
2016): the input transform V = Bᵀ d B and weight transform U = G g Gᵀ are n² values each, indexed
``ξ = n·a + b`` (row transform a, column transform b); the conv's GEMMs multiply U[ξ] (M × C) by
V[ξ] (C × tiles), and the output transform Aᵀ m A folds the n² products back into m × m pixels.

* F(2×2, 3×3), points 0, ±1, ∞: the transforms only add and subtract (and halve, for the weight),
  written as in-place adds on strided views.
* F(4×4, 3×3), points 0, -1, 1, 1/2, -2, ∞: the best-conditioned F(4, 3) set of Barabasz, Anderson,
  Soodhalter and Gregg ("Error analysis and improving the accuracy of Winograd convolution for deep
  neural networks", ACM TOMS 2020). Measured here against float64, weights N(0, 0.02): this kernel
  on 512 → 128 channels at 64×64, max error 4.9e-6 of the output's scale (F(2×2) 5.5e-7); a
  float32 einsum prototype on 512 → 64 channels, 3.7e-6 with these points against 1.0e-5 with the
  textbook 0, ±1, ±2 (im2col 4.4e-7). Its matrices have
  fractions, so both its input and output transforms are small GEMMs: the strided rows or columns
  of the tiles are gathered into one contiguous block, then multiplied by Bᵀ (6 × 6) or Aᵀ (4 × 6).

The matrices follow Toom-Cook: Aᵀ[i, j] = p_jⁱ, G[j, k] = p_jᵏ / Π_{l≠j}(p_j − p_l), ∞ as the last
point; Bᵀ solves Σ_j Aᵀ[i, j] G[j, k] Bᵀ[j, t] = [t = i + k] (``tests/engine/ops/test_conv_winograd.py``
checks that identity exactly, in fractions).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction as F
from functools import partial

import numpy as np

from frame.engine import buffers
from frame.engine.ops.blocks import gemm_pieces, matmul_into, run_tasks, workers
from frame.engine.ops.conv_im2col import PaddedRows


def _matrix(rows) -> np.ndarray:
    return np.array([[float(F(v)) for v in row] for row in rows], np.float64)


G2 = _matrix([[1, 0, 0], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], [0, 0, 1]])
# F(4×4, 3×3), points 0, -1, 1, 1/2, -2, ∞ (exact fractions: the test rebuilds them)
AT4_EXACT = [[1, 1, 1, 1, 1, 0], [0, -1, 1, "1/2", -2, 0], [0, 1, 1, "1/4", 4, 0], [0, -1, 1, "1/8", -8, 1]]
G4_EXACT = [[1, 0, 0], ["-1/3", "1/3", "-1/3"], ["1/3", "1/3", "1/3"], ["-16/15", "-8/15", "-4/15"],
            ["1/15", "-2/15", "4/15"], [0, 0, 1]]
BT4_EXACT = [[1, "-3/2", -2, "3/2", 1, 0], [0, 1, "-5/2", "1/2", 1, 0], [0, -1, "1/2", "5/2", 1, 0],
             [0, -2, -1, 2, 1, 0], [0, "1/2", -1, "-1/2", 1, 0], [0, 1, "-3/2", -2, "3/2", 1]]
AT4 = _matrix(AT4_EXACT).astype(np.float32)
BT4 = _matrix(BT4_EXACT).astype(np.float32)
G4 = _matrix(G4_EXACT)
IN_BLOCK = 8  # input channels per F(4) input transform block: its gathered rows stay in cache
IN_BLOCK_FLOATS = 8192  # thin bands, where the plan has room: up to this many floats of one gathered row
OUT_BLOCK = 16  # output channels per F(4) output transform block


def weight_transform_t(g: np.ndarray) -> np.ndarray:
    """Kᵀ (n², 9) with Kᵀ @ gᵀ (9, M·C) = every G g Gᵀ, laid out ξ = n·a + b, float32."""
    n = g.shape[0]
    return np.ascontiguousarray(np.einsum("ai,bj->abij", g, g).reshape(n * n, 9)).astype(np.float32)


def view(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array.reshape(shape)`` that must not copy (kernels write through it)."""
    result = array.reshape(shape)
    if result.flags.owndata:
        raise AssertionError(f"reshape of {array.shape} to {shape} would copy")
    return result


def input_scratch(tile: int, channels: int, tile_rows: int, width: int, tile_cols: int, block: int = 0) -> int:
    """Floats of scratch ``transform_input`` needs for ``tile_rows`` × ``tile_cols`` tiles of
    ``channels`` channels, ``width`` padded columns; F(4): ``block`` channels at a time (default
    ``IN_BLOCK``; ``transform_input`` takes as many as its scratch holds)."""
    if tile == 2:  # the row transform
        return 4 * channels * tile_rows * width
    # one channel block's gathered rows, their transform and all six row transforms' gathered columns
    return min(channels, block or IN_BLOCK) * _input_floats(tile_rows, width, tile_cols)


def wide_in_block(channels: int, tile_rows: int, width: int) -> int:
    """Input channels per F(4) input transform block for a thin band, when the memory plan has room:
    up to ``IN_BLOCK_FLOATS`` floats of one gathered row (a band of one tile row at 288×288: 28
    channels, not 8, so 3.5× fewer numpy calls for the same work)."""
    return min(channels, max(IN_BLOCK, IN_BLOCK_FLOATS // (tile_rows * width)))


def _input_floats(tile_rows: int, width: int, tile_cols: int) -> int:
    return 12 * tile_rows * width + 36 * tile_rows * tile_cols


def output_scratch(tile: int, outputs: int, tiles: int) -> int:
    """Floats of scratch ``transform_output`` needs beside the GEMM result (F(4): one channel block's
    row transform and result)."""
    return 0 if tile == 2 else 40 * min(outputs, OUT_BLOCK) * tiles


def transform_input(tile: int, padded: np.ndarray, tiles: tuple[int, int], v: np.ndarray,
                    scratch: np.ndarray) -> None:
    """Bᵀ d B of every (tile+2)² input tile (stride ``tile``) of ``padded`` (C, tile·th+2, ≥ tile·tw+2)
    into v ((tile+2)², C, th·tw); ``scratch`` holds at least ``input_scratch`` floats.

    F(4): as many channels at a time as ``scratch`` holds (``input_scratch``; bounded scratch, and the
    gathered block stays in cache); the six row transforms' columns are gathered together and
    transformed in one batched product (14 numpy calls a block instead of 49: 256 → 256 at 256×256,
    127 → 89 ms CPU of the input transform)."""
    th, tw = tiles
    c, _, width = padded.shape
    if tile == 2:
        _input2(padded, tiles, v, view(scratch[:4 * c * th * width], (4, c, th, width)))
        return
    v_ab = view(v, (6, 6, c, th * tw))
    block = min(c, scratch.size // _input_floats(th, width, tw))  # as many channels as the scratch holds
    for c0 in range(0, c, block):
        c1 = min(c0 + block, c)
        cb = c1 - c0
        size, count = cb * th * width, cb * th * tw
        gathered = view(scratch[:6 * size], (6, cb, th, width))
        for i in range(6):
            gathered[i] = padded[c0:c1, i:i + 4 * th:4]
        rows = view(scratch[6 * size:12 * size], (6, cb, th, width))
        np.matmul(BT4, view(gathered, (6, size)), out=view(rows, (6, size)))
        # every row transform's columns at once: columns[j, a] = column j of each tile of rows[a]
        columns = view(scratch[12 * size:12 * size + 36 * count], (6, 6, cb, th, tw))
        for j in range(6):
            columns[j] = rows[:, :, :, j:j + 4 * tw:4]
        # v[6a + b] = Σ_j Bᵀ[b, j] columns[j, a]: one product per a, in one call
        np.matmul(BT4, view(columns, (6, 6, count)).transpose(1, 0, 2),
                  out=view(v_ab[:, :, c0:c1], (6, 6, count)))


def transform_output(tile: int, mo: np.ndarray, tiles: tuple[int, int], out: np.ndarray,
                     scratch: np.ndarray | None) -> None:
    """Aᵀ m A of every tile: mo ((tile+2)², M, th·tw) (overwritten) → out (M, ≤ tile·th, ≤ tile·tw);
    ``scratch``: at least ``output_scratch`` floats (F(2): None). F(4): ``OUT_BLOCK`` channels at a time."""
    th, tw = tiles
    if tile == 2:
        _output2(mo, tiles, out)
        return
    m, count = mo.shape[1], th * tw
    ho, wo = out.shape[1:]
    by_column = view(mo, (6, 6, m * count)).transpose(1, 0, 2)  # [b, a]: each a (6, ·) matrix for BLAS
    for m0 in range(0, m, OUT_BLOCK):
        m1 = min(m0 + OUT_BLOCK, m)
        size = (m1 - m0) * count
        rows = view(scratch[:24 * size], (6, 4, size))  # rows[b, i] = Σ_a Aᵀ[i, a] mo[a, b]
        np.matmul(AT4, by_column[:, :, m0 * count:m1 * count], out=rows)
        y = view(scratch[24 * size:40 * size], (4, 4, size))  # y[i, j] = Σ_b Aᵀ[j, b] rows[b, i]
        np.matmul(AT4, rows.transpose(1, 0, 2), out=y)
        y = view(y, (4, 4, m1 - m0, th, tw))
        for i in range(4):
            rows_i = (ho - i + 3) // 4
            for j in range(4):
                out[m0:m1, i::4, j::4] = y[i, j, :, :rows_i, :(wo - j + 3) // 4]


def _input2(padded: np.ndarray, tiles: tuple[int, int], v: np.ndarray, rows: np.ndarray) -> None:
    """F(2×2)'s Bᵀ d B; ``rows`` (4, C, th, width) is scratch for the transform along the rows."""
    th, tw = tiles
    c = padded.shape[0]
    d = [padded[:, i:i + 2 * th:2] for i in range(4)]  # (C, th, width) each
    np.subtract(d[0], d[2], out=rows[0])
    np.add(d[1], d[2], out=rows[1])
    np.subtract(d[2], d[1], out=rows[2])
    np.subtract(d[1], d[3], out=rows[3])
    for a in range(4):
        e = [rows[a][:, :, j:j + 2 * tw:2] for j in range(4)]  # (C, th, tw) each
        target = view(v[4 * a:4 * a + 4], (4, c, th, tw))
        np.subtract(e[0], e[2], out=target[0])
        np.add(e[1], e[2], out=target[1])
        np.subtract(e[2], e[1], out=target[2])
        np.subtract(e[1], e[3], out=target[3])


def _output2(mo: np.ndarray, tiles: tuple[int, int], out: np.ndarray) -> None:
    """F(2×2)'s Aᵀ m A, in place on mo's rows."""
    th, tw = tiles
    t = view(mo, (4, 4, mo.shape[1], th, tw))
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


_WEIGHT_TRANSFORM_T = {2: weight_transform_t(G2), 4: weight_transform_t(G4)}

MIN_TILES = 64  # 2×2 output tiles: an 8×8 image (16 tiles) gains too little for the weight transform
MIN_CHANNELS = 16  # the SD UNet's conv_in (4 input channels) gains nothing
MIN_TILES_F4 = 64  # 4×4 output tiles (a 32×32 image)
MIN_OUTPUTS_F4 = 64  # output channels: F(4×4)'s dearer transforms are shared by fewer GEMM rows below
CHUNK_WEIGHT_BYTES = 4 << 20  # transformed weight per chunk: stays in cache until its GEMMs read it
MIN_CHUNK = 64  # output channels per chunk: fewer make the GEMMs too flat (32: 118 vs 95 ms at 640->320, 64x64)
MIN_BAND_TILES = 64  # tiles per band's GEMM (its N): 2 tile rows of a 64-wide image still beat im2col by 1.5x
CHANNEL_BLOCK = 64  # input channels transformed at a time in the chunk layout
WEIGHT_BLOCK = 128  # input channels per transformed-weight block in the chunk layout (``_chunk_products``)
BLOCKED_MAX_TILES = 128  # ... where a band has at most this many tiles (more: the GEMMs dominate, one block)


@dataclass(frozen=True)
class Plan:
    """``tile_rows`` per band, ``chunk`` output channels per transformed-weight chunk (chunk < M: the
    chunk layout, one band of all tile rows), ``threads`` sharing the bands or chunks (1: the
    threads split each GEMM instead) and ``tile``: 4 for F(4×4, 3×3), 2 for F(2×2, 3×3)."""

    tile_rows: int
    chunk: int
    threads: int = 1
    tile: int = 2
    in_block: int = IN_BLOCK


def _tiles(out_hw: tuple[int, int], tile: int) -> tuple[int, int]:
    return -(-out_hw[0] // tile), -(-out_hw[1] // tile)


def _chunk_plan(channels: int, outputs: int, out_hw, tile: int, budget: int, pieces: int,
                banded: bool = False) -> Plan | None:
    """The chunk layout: V of the whole image beside the chunks, or (``banded``) V of bands of tile
    rows, each band's U chunks made again (9 multiply-adds per tile of a chunk, a few % of its GEMMs)."""
    th, tw = _tiles(out_hw, tile)
    if outputs < 2 * MIN_CHUNK:
        return None
    n2 = (tile + 2) ** 2
    width = tile * tw + 2
    block = min(channels, CHANNEL_BLOCK)
    least = -(-min(MIN_BAND_TILES, th * tw) // tw)  # tile rows per band at least
    for threads in sorted({pieces, 1}, reverse=True):
        top = min(max(MIN_CHUNK, CHUNK_WEIGHT_BYTES // (4 * n2 * channels)), -(-outputs // threads))
        for bands in range(1, th + 1 if banded else 2):
            rows = -(-th // bands)
            if rows < least:
                break
            # V of a band and its padded rows, beside the input transform's scratch or the chunks
            fixed = 4 * (n2 * channels * rows * tw + block * (tile * rows + 2) * width)
            free = budget - fixed - 4 * threads * output_scratch(tile, top, rows * tw)
            if 4 * input_scratch(tile, block, rows, width, tw) >= budget - fixed:
                continue
            chunk = min(top, free // (threads * 4 * n2 * (_chunk_floats(channels, rows * tw))))
            if chunk >= MIN_CHUNK:
                return Plan(-(-th // bands), int(chunk), threads, tile)
    return None


def _chunk_floats(channels: int, count: int) -> int:
    """Floats per output channel and ξ of a chunk's buffers: one weight block of U and the GEMM result
    over ``count`` tiles (and, with more than one weight block, the block's partial result)."""
    block = weight_block(channels, count)
    return block + (2 if channels > block else 1) * count


def weight_block(channels: int, count: int) -> int:
    """Input channels per U block of a chunk whose band has ``count`` tiles: ``WEIGHT_BLOCK`` where the
    weight transform weighs (few tiles: 1280 → 1280 at 32×32, 64 tiles of F(4×4), 214 → 153 ms CPU),
    all of them where the GEMMs dominate (512 → 512 at 64×64, 256 tiles: blocks of 128 cost 6 % more,
    summing their products)."""
    return channels if count > BLOCKED_MAX_TILES else min(channels, WEIGHT_BLOCK)


def weight_blocked(layout: Plan, channels: int, outputs: int, out_hw: tuple[int, int]) -> bool:
    """Whether ``winograd_conv3x3`` with ``layout`` makes its chunks' U in blocks of input channels
    (``weight_block``; the Pi projection's ``pi.WEIGHT_BLOCK_GAIN`` applies there)."""
    count = layout.tile_rows * _tiles(out_hw, layout.tile)[1]
    return layout.chunk < outputs and weight_block(channels, count) < channels


def _band_plan(channels: int, outputs: int, out_hw, tile: int, budget: int, pieces: int) -> Plan | None:
    th, tw = _tiles(out_hw, tile)
    n2 = (tile + 2) ** 2
    width = tile * tw + 2
    u_bytes = n2 * outputs * channels * 4
    # per tile row: padded input rows, the input transform's scratch, V, GEMM result, output scratch
    per_row = 4 * (tile * channels * width + input_scratch(tile, channels, 1, width, tw)
                   + n2 * tw * (channels + outputs) + output_scratch(tile, outputs, tw))
    for threads in sorted({pieces, 1}, reverse=True):
        rows = min(th, (budget - u_bytes) // (threads * per_row)) if u_bytes < budget else 0
        if rows * tw >= min(MIN_BAND_TILES, th * tw) and (threads == 1 or th >= 2 * threads):
            bands = -(-th // rows)
            bands = -(-bands // threads) * threads  # every thread gets as many bands
            layout = Plan(-(-th // bands), outputs, threads, tile)
            if tile == 4:  # thin bands: more input channels a block where the budget has room
                wide = replace(layout, in_block=wide_in_block(channels, layout.tile_rows, width))
                if scratch_bytes(wide, channels, outputs, out_hw) <= budget:
                    return wide
            return layout
    return None


def plan(channels: int, outputs: int, out_hw: tuple[int, int], budget: int, pieces: int) -> Plan | None:
    """Layout within ``budget`` bytes of temporaries for ``pieces`` threads, or None (use im2col).

    F(4×4) where it has the output channels and tiles to gain, else F(2×2). Chunks are preferred
    (each chunk's U is made while the cache holds it); then bands; then (F(4×4), whose U is 4× the
    weight: 512 → 512 channels at 128×128 fits neither) chunks within bands of tile rows. Each first
    with a share per thread, else with all threads on every GEMM (less memory: one band or chunk at a
    time).
    """
    if channels < MIN_CHANNELS:
        return None
    tiles4 = _tiles(out_hw, 4)
    if outputs >= MIN_OUTPUTS_F4 and tiles4[0] * tiles4[1] >= MIN_TILES_F4:
        layout = (_chunk_plan(channels, outputs, out_hw, 4, budget, pieces)
                  or _band_plan(channels, outputs, out_hw, 4, budget, pieces)
                  or _chunk_plan(channels, outputs, out_hw, 4, budget, pieces, banded=True))
        if layout is not None:
            return layout
    tiles = _tiles(out_hw, 2)
    if tiles[0] * tiles[1] < MIN_TILES:
        return None
    return (_chunk_plan(channels, outputs, out_hw, 2, budget, pieces)
            or _band_plan(channels, outputs, out_hw, 2, budget, pieces))


def scratch_bytes(layout: Plan, channels: int, outputs: int, out_hw: tuple[int, int]) -> int:
    """Peak temporary bytes of ``winograd_conv3x3`` with ``layout`` (output and input not counted), as
    ``_by_bands`` and ``_by_chunks`` allocate them; the estimate's memory model counts this
    (``conv.conv_image_scratch``).

    bands: the whole U, then per thread the padded input rows, the input transform's scratch, V and
    the GEMM result (and F(4)'s output scratch) of one band. chunks: V of (a band of) the image beside
    the larger of two phases: the input transform's padded rows and scratch of one channel block
    (``_input_shares`` lets as many threads transform at once as fit in this), then each thread's U
    block, GEMM result (and partial result, with more than one weight block) and output scratch."""
    tile = layout.tile
    th, tw = _tiles(out_hw, tile)
    n2 = (tile + 2) ** 2
    width = tile * tw + 2  # the padded columns (``winograd_conv3x3`` pads right up to whole tiles)
    if layout.chunk >= outputs:
        rows = layout.tile_rows
        band = (channels * (tile * rows + 2) * width + input_scratch(tile, channels, rows, width, tw, layout.in_block)
                + n2 * rows * tw * (channels + outputs) + output_scratch(tile, outputs, rows * tw))
        return 4 * (n2 * outputs * channels + layout.threads * band)
    v, transform, chunks = _chunk_phases(layout, channels, out_hw)
    return 4 * (v + max(transform, chunks))


def _chunk_phases(layout: Plan, channels: int, out_hw: tuple[int, int]) -> tuple[int, int, int]:
    """Floats of the chunk layout's buffers: V, one channel block's padded rows and input transform
    scratch (per transforming thread), and all threads' chunk buffers (``_chunk_products``)."""
    tile, rows = layout.tile, layout.tile_rows
    tw = _tiles(out_hw, tile)[1]
    width = tile * tw + 2  # the padded columns (``winograd_conv3x3`` pads right up to whole tiles)
    n2 = (tile + 2) ** 2
    block = min(channels, CHANNEL_BLOCK)
    transform = block * (tile * rows + 2) * width + input_scratch(tile, block, rows, width, tw)
    chunks = layout.threads * (n2 * layout.chunk * _chunk_floats(channels, rows * tw)
                               + output_scratch(tile, layout.chunk, rows * tw))
    return n2 * channels * rows * tw, transform, chunks


def transform_weight(w: np.ndarray, step: int = 1 << 15, out: np.ndarray | None = None, tile: int = 2) -> np.ndarray:
    """(M, C, 3, 3) float32 → U (n², M, C): U[n·a + b] = (G g Gᵀ)[a, b] (n = tile + 2), ``step``
    filters per GEMM.

    ``out`` (at least n²·M·C floats) is used instead of a fresh array: the chunk layout makes one
    U per chunk, and a fresh 5 MB array each time is 5 MB of new pages for the kernel to zero."""
    m, c = w.shape[:2]
    n2 = (tile + 2) ** 2
    flat = np.ascontiguousarray(w).reshape(m * c, 9)
    u = buffers.empty((n2, m * c), np.float32) if out is None else view(out[:n2 * m * c], (n2, m * c))
    for r0 in range(0, m * c, step):
        np.matmul(_WEIGHT_TRANSFORM_T[tile], flat[r0:r0 + step].T, out=u[:, r0:r0 + step])
    return u.reshape(n2, m, c)


def transform_weight_block(w: np.ndarray, out: np.ndarray, tile: int) -> np.ndarray:
    """(M, C, 3, 3) float32, any strides of a slice → U (M, n², C) in ``out`` (at least M·n²·C floats):
    U[m, n·a + b] = (G g Gᵀ)[a, b] (n = tile + 2), one (n² × 9) @ (9 × C) product per output channel.

    The chunk layout's weight: ``transform_weight``'s single (n² × 9) @ (9 × M·C) product has an inner
    dimension of 9 and writes all n² rows of a chunk far apart (out of cache), which BLAS runs far below
    its rate (1280 → 640 at 32×32: 34 ms of the conv's 116); here each output channel's n² × C block is
    written at once, and for ``WEIGHT_BLOCK`` input channels the whole block stays in cache until the
    GEMMs read it as U[:, ξ, :] (rows n²·C apart: still a BLAS matrix)."""
    m, c = w.shape[:2]
    n2 = (tile + 2) ** 2
    u = view(out[:m * n2 * c], (m, n2, c))
    np.matmul(_WEIGHT_TRANSFORM_T[tile], w.reshape(m, c, 9).transpose(0, 2, 1), out=u)
    return u


def winograd_conv3x3(x: np.ndarray, w: np.ndarray, pads, out: np.ndarray, layout: Plan, transform=None) -> None:
    """x (C, H, W), w (M, C, 3, 3) float32, stride 1 → out (M, Ho, Wo), bias not added.

    ``transform(rows, first_channel=0)`` maps the copied input rows in place before they are
    transformed (``PaddedRows.fill``; the GroupNorm + SiLU of ``passes.norm_conv``): ``rows`` holds
    channels ``first_channel ..`` of the image."""
    m, ho, wo = out.shape
    tiles = _tiles((ho, wo), layout.tile)
    # pad right (and, through PaddedRows, bottom) up to whole tiles: tile·tw + 2 padded input columns
    full = [pads[0], pads[1], 0, layout.tile * tiles[1] + 2 - (x.shape[2] + pads[1])]
    threads = min(layout.threads, gemm_pieces(m * x.shape[0] * 4 * ho * wo))
    if layout.chunk >= m:
        _by_bands(x, w, full, tiles, out, layout, threads, transform)
    else:
        _by_chunks(x, w, full, tiles, out, layout, threads, transform)


def _by_bands(x: np.ndarray, w: np.ndarray, pads, tiles, out: np.ndarray, layout: Plan, threads: int,
              transform=None) -> None:
    c, m = x.shape[0], w.shape[0]
    th, tw = tiles
    tile, tile_rows = layout.tile, layout.tile_rows
    n2 = (tile + 2) ** 2
    u = transform_weight(w, tile=tile)
    bands = list(range(0, th, tile_rows))
    shares = min(threads, len(bands))
    size = -(-len(bands) // shares)

    def run(share: list[int]) -> None:
        padded = PaddedRows(c, tile * tile_rows + 2, x.shape[2], pads, np.float32)
        width = padded.buffer.shape[2]
        scratch = [buffers.empty(n, np.float32) for n in (
            input_scratch(tile, c, tile_rows, width, tw, layout.in_block), n2 * tile_rows * tw * (c + m),
            max(output_scratch(tile, m, tile_rows * tw), 1))]
        for t0 in share:
            count = min(tile_rows, th - t0)
            v = view(scratch[1][:n2 * c * count * tw], (n2, c, count * tw))
            mo = view(scratch[1][n2 * c * count * tw:n2 * (c + m) * count * tw], (n2, m, count * tw))
            source = padded.fill(x, tile * t0, tile * count + 2, transform)
            transform_input(tile, source, (count, tw), v, scratch[0])
            if shares > 1:  # the bands are shared out already: one BLAS thread each
                np.matmul(u, v, out=mo)
            else:
                matmul_into(u, v, mo)
            transform_output(tile, mo, (count, tw), out[:, tile * t0:tile * (t0 + count)], scratch[2])

    run_tasks([lambda s=s: run(bands[s:s + size]) for s in range(0, len(bands), size)])


def _by_chunks(x: np.ndarray, w: np.ndarray, pads, tiles, out: np.ndarray, layout: Plan, threads: int,
               transform=None) -> None:
    c, m = x.shape[0], w.shape[0]
    th, tw = tiles
    tile, chunk, tile_rows = layout.tile, layout.chunk, layout.tile_rows
    n2 = (tile + 2) ** 2
    v_buffer = buffers.empty(n2 * c * tile_rows * tw, np.float32)
    chunks = list(range(0, m, chunk))
    shares = min(threads, len(chunks))
    size = -(-len(chunks) // shares)
    channel_blocks = list(range(0, c, min(c, CHANNEL_BLOCK)))
    input_shares = min(len(channel_blocks), workers(), _input_shares(layout, c, out.shape[1:]))
    for t0 in range(0, th, tile_rows):
        count = min(tile_rows, th - t0)
        v = view(v_buffer[:n2 * c * count * tw], (n2, c, count * tw))
        run_tasks([partial(_transform_blocks, x, pads, layout, t0, (count, tw), v, channel_blocks[s::input_shares],
                           transform) for s in range(input_shares)])
        target = out[:, tile * t0:tile * (t0 + count)]
        run_tasks([partial(_chunk_products, w, v, (count, tw), target, chunks[s:s + size], layout, shares > 1)
                   for s in range(0, len(chunks), size)])


def _input_shares(layout: Plan, channels: int, out_hw: tuple[int, int]) -> int:
    """Threads that may transform the chunk layout's channel blocks at once: each needs its own padded
    rows and input transform scratch, and as many as fit in what ``scratch_bytes`` counts beside V
    (the larger of one such pair and the chunks' buffers, which are made after them) share the
    blocks, so the peak does not grow."""
    _, transform, chunks = _chunk_phases(layout, channels, out_hw)
    return max(1, max(transform, chunks) // transform)


def _transform_blocks(x: np.ndarray, pads, layout: Plan, t0: int, tiles, v: np.ndarray, share: list[int],
                      transform=None) -> None:
    """The input transform (and ``transform``, NormConv's normalisation) of the channel blocks ``share``
    of one band into V, with padded rows and scratch of its own (``_input_shares`` counts them)."""
    c, tile, (count, tw) = x.shape[0], layout.tile, tiles
    block = min(c, CHANNEL_BLOCK)
    padded = PaddedRows(block, tile * layout.tile_rows + 2, x.shape[2], pads, np.float32)
    scratch = buffers.empty(input_scratch(tile, block, layout.tile_rows, padded.buffer.shape[2], tw), np.float32)
    for c0 in share:
        c1 = min(c0 + block, c)
        block_transform = None if transform is None else partial(transform, first_channel=c0)
        source = padded.fill(x[c0:c1], tile * t0, tile * count + 2, block_transform)
        transform_input(tile, source, (count, tw), v[:, c0:c1], scratch)


def _chunk_products(w: np.ndarray, v: np.ndarray, tiles, out: np.ndarray, share: list[int], layout: Plan,
                    shared: bool) -> None:
    """The GEMMs and output transform of the output-channel chunks ``share`` for one band's V.

    Each chunk's U is made and multiplied ``WEIGHT_BLOCK`` input channels at a time
    (``transform_weight_block``: 64 outputs × 128 inputs of F(4×4) are 1.2 MB, still in cache when
    the GEMMs read them), the blocks' products summed into the first's."""
    m, c, tile, chunk = w.shape[0], w.shape[1], layout.tile, layout.chunk
    n2, count = (tile + 2) ** 2, tiles[0] * tiles[1]
    block = weight_block(c, count)
    result = buffers.empty(n2 * chunk * (_chunk_floats(c, count) - block), np.float32)
    u_buffer = buffers.empty(n2 * chunk * block, np.float32)
    out_scratch = buffers.empty(max(output_scratch(tile, chunk, count), 1), np.float32)
    for m0 in share:
        m1 = min(m0 + chunk, m)
        size = n2 * (m1 - m0) * count
        mo = view(result[:size], (n2, m1 - m0, count))
        for c0 in range(0, c, block):
            c1 = min(c0 + block, c)
            u = transform_weight_block(w[m0:m1, c0:c1], u_buffer, tile).transpose(1, 0, 2)
            target = mo if c0 == 0 else view(result[size:2 * size], (n2, m1 - m0, count))
            if shared:  # the chunks are shared out already: one BLAS thread each
                np.matmul(u, v[:, c0:c1], out=target)
            else:
                matmul_into(u, v[:, c0:c1], target)
            if c0:
                np.add(mo, target, out=mo)
        transform_output(tile, mo, tiles, out[m0:m1], out_scratch)
