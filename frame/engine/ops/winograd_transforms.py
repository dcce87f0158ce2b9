"""The tile transforms of Winograd's F(2×2, 3×3) and F(4×4, 3×3) (``ops.conv_winograd`` runs the GEMMs).

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

from fractions import Fraction as F

import numpy as np


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
