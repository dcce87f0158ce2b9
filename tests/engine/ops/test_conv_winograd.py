"""Winograd F(2x2, 3x3) and F(4x4, 3x3) convs and their tile transforms (ops.conv_winograd): both
layouts and the banded chunks, odd sizes and pads, split over threads, the planner's choice, F(4x4)'s
matrices and its accuracy."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from frame.engine.ops import conv as conv_module
from frame.engine.ops import conv_winograd as cw


def _reference(x: np.ndarray, w: np.ndarray, pads) -> np.ndarray:
    """Direct 3x3 conv in float64 (one image)."""
    padded = np.pad(x.astype(np.float64), [(0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    ho, wo = padded.shape[1] - 2, padded.shape[2] - 2
    out = np.zeros((w.shape[0], ho, wo))
    for i in range(3):
        for j in range(3):
            out += np.einsum("mc,chw->mhw", w[:, :, i, j].astype(np.float64), padded[:, i:i + ho, j:j + wo])
    return out


CASES = [  # channels, outputs, height, width, pads, layout
    (16, 8, 16, 16, (1, 1, 1, 1), cw.Plan(8, 8)),      # bands: one band of all tile rows
    (20, 12, 15, 17, (1, 1, 1, 1), cw.Plan(3, 12)),    # odd output: last tile row and column half used
    (32, 16, 17, 18, (0, 1, 2, 0), cw.Plan(1, 16)),    # asymmetric pads, one tile row per band
    (16, 256, 16, 16, (1, 1, 1, 1), cw.Plan(8, 64)),   # chunks of output channels
    (80, 250, 15, 16, (1, 1, 1, 1), cw.Plan(8, 96)),   # chunks, the last short; input in channel blocks
    (16, 8, 16, 16, (1, 1, 1, 1), cw.Plan(4, 8, 1, 4)),      # F(4x4) bands: one band
    (20, 12, 15, 17, (1, 1, 1, 1), cw.Plan(2, 12, 1, 4)),    # F(4x4), odd output: tiles 3/4 and 1/4 used
    (32, 16, 17, 18, (0, 1, 2, 0), cw.Plan(1, 16, 1, 4)),    # F(4x4), asymmetric pads, one tile row a band
    (16, 256, 16, 16, (1, 1, 1, 1), cw.Plan(4, 64, 1, 4)),   # F(4x4) chunks, whole image
    (80, 250, 15, 16, (1, 1, 1, 1), cw.Plan(4, 96, 1, 4)),   # F(4x4) chunks, the last short, 80 = 5 blocks
    (24, 200, 22, 13, (1, 1, 1, 1), cw.Plan(2, 64, 1, 4)),   # F(4x4) chunks within bands, the last band short
    (24, 130, 13, 21, (1, 1, 1, 1), cw.Plan(3, 64, 1, 2)),   # F(2x2) chunks within bands
    (40, 16, 13, 22, (1, 1, 1, 1), cw.Plan(1, 16, 1, 4, 24)),  # F(4x4) thin bands, input blocks of 24, 16
]


def _assert_matches_float64(seed, c, m, h, w, pads, layout):
    """The kernel's output against float64 within F(2x2)'s 1e-6 / F(4x4)'s 5e-6 of the output's scale."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    weight = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    want = _reference(x, weight, pads)
    out = np.full(want.shape, np.nan, np.float32)
    cw.winograd_conv3x3(x, weight, pads, out, layout)
    bound = 1e-6 if layout.tile == 2 else 5e-6
    assert np.abs(out - want).max() < bound * np.abs(want).max()


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("c, m, h, w, pads, layout", CASES)
def test_winograd_matches_direct_float64(request, split, c, m, h, w, pads, layout):
    if split:
        request.getfixturevalue("two_way_splits")
    _assert_matches_float64(0, c, m, h, w, pads, layout)


def test_f4_error_on_sd_like_weights_is_within_the_documented_bound():
    """256 channels at 32x32, weights N(0, 0.02) as in SD's convs: max error under 6e-6 of the output's
    scale against float64 (the module states 4.9e-6 at 512 channels; F(2x2) stays under 1e-6 above)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((64, 256, 3, 3)) * 0.02).astype(np.float32)
    want = _reference(x, w, (1, 1, 1, 1))
    out = np.empty(want.shape, np.float32)
    cw.winograd_conv3x3(x, w, (1, 1, 1, 1), out, cw.Plan(8, 64, 1, 4))
    error = np.abs(out - want).max() / np.abs(want).max()
    assert error < 6e-6, error


def test_f4_matrices_are_exact_toom_cook():
    """Aᵀ, G and Bᵀ of F(4, 3) compute a 3-tap correlation exactly (in fractions), for every output,
    tap and input position; the float matrices are those fractions."""
    at = [[Fraction(v) for v in row] for row in cw.AT4_EXACT]
    g = [[Fraction(v) for v in row] for row in cw.G4_EXACT]
    bt = [[Fraction(v) for v in row] for row in cw.BT4_EXACT]
    for i in range(4):
        for k in range(3):
            for t in range(6):
                assert sum(at[i][j] * g[j][k] * bt[j][t] for j in range(6)) == (1 if t == i + k else 0)
    np.testing.assert_array_equal(cw.G4, np.array([[float(v) for v in row] for row in g]))


def test_planner_takes_f4_where_it_gains_and_f2_or_im2col_elsewhere():
    budget = 32 << 20
    vae_64 = cw.plan(512, 512, (64, 64), budget, 2)
    assert vae_64.tile == 4 and vae_64.chunk < 512 and vae_64.tile_rows == 16  # chunks, V of the whole image
    vae_128 = cw.plan(512, 512, (128, 128), budget, 2)
    assert vae_128.tile == 4 and vae_128.chunk < 512 and vae_128.tile_rows < 32  # U 38 MB: chunks in bands
    assert cw.plan(256, 256, (256, 256), budget, 2).tile == 4
    assert cw.plan(1280, 1280, (16, 16), budget, 2) == cw.Plan(8, 64, 2)  # 16 4x4 tiles: F(2x2) chunks
    assert cw.plan(128, 32, (64, 64), budget, 1).tile == 2  # 32 outputs: F(4x4)'s transforms cost more
    assert cw.plan(1280, 1280, (8, 8), budget, 1) is None  # 16 2x2 tiles: im2col
    assert cw.plan(4, 320, (64, 64), budget, 1) is None  # too few input channels
    for channels, outputs, size in [(512, 512, 128), (640, 320, 64), (256, 256, 256), (1280, 1280, 16)]:
        layout = cw.plan(channels, outputs, (size, size), budget, 2)
        assert cw.scratch_bytes(layout, channels, outputs, (size, size)) <= budget, layout


def test_f2_layouts_are_planned_and_budgets_respected():
    """F(2x2) alone (F(4x4) off): chunks, bands, one band at a time, None where neither fits."""
    def plan2(*args):
        saved, cw.MIN_OUTPUTS_F4 = cw.MIN_OUTPUTS_F4, 1 << 30
        try:
            return cw.plan(*args)
        finally:
            cw.MIN_OUTPUTS_F4 = saved

    chunks = plan2(1280, 1280, (16, 16), 32 << 20, 2)
    assert chunks == cw.Plan(8, 64, 2)  # U would be 105 MB: chunks of output channels, shared by 2 threads
    bands = plan2(640, 320, (64, 64), 32 << 20, 2)  # whole V (42 MB) too big: whole U (13 MB), bands
    assert bands.chunk == 320 and bands.threads == 2 and -(-32 // bands.tile_rows) >= 4
    tight = plan2(960, 320, (64, 64), 32 << 20, 2)
    assert tight.threads == 1 and tight.tile_rows >= 2  # one band at a time, its GEMMs split
    assert plan2(1920, 640, (32, 32), 32 << 20, 1) is None  # neither layout fits the budget


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("outputs, tile", [(40, 2), (64, 4)])
def test_conv_op_uses_winograd_and_matches_onnxruntime(request, split, monkeypatch, outputs, tile):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    if split:
        request.getfixturevalue("two_way_splits")
    used = []
    original = cw.winograd_conv3x3
    monkeypatch.setattr(cw, "winograd_conv3x3", lambda *a, **k: used.append(a[4].tile) or original(*a, **k))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 32, 41, 39)).astype(np.float32)
    w = (rng.standard_normal((outputs, 32, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(outputs).astype(np.float32)
    got = conv_module.conv(x, w, b, pads=[1, 1, 1, 1])
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert used == [tile, tile]  # one call per image
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tile, g", [(2, cw.G2), (4, cw.G4)])
def test_weight_transform_is_g_g_gt(tile, g):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    n = tile + 2
    want = np.einsum("ai,mcij,bj->abmc", g, w.astype(np.float64), g).reshape(n * n, 5, 3)
    np.testing.assert_allclose(cw.transform_weight(w, step=4, tile=tile), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("tile, g", [(2, cw.G2), (4, cw.G4)])
def test_weight_block_transform_is_g_g_gt_per_output_channel(tile, g):
    """The chunk layout's U (M, n², C) of a strided slice of the weight (outputs 2..6, inputs 3..10)."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((8, 12, 3, 3)).astype(np.float32)
    n = tile + 2
    part = w[2:6, 3:10]
    want = np.einsum("ai,mcij,bj->mabc", g, part.astype(np.float64), g).reshape(4, n * n, 7)
    out = np.full(4 * n * n * 7 + 5, np.nan, np.float32)
    got = cw.transform_weight_block(part, out, tile)
    assert got.shape == (4, n * n, 7)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_weight_blocks_where_the_weight_transform_weighs():
    """Few tiles (the UNet's 32x32 and 16x16 convs): U in blocks of WEIGHT_BLOCK input channels; many
    (64x64 and up), the GEMMs dominate and the chunk's U is one block."""
    assert cw.weight_block(1280, 64) == cw.WEIGHT_BLOCK == 128
    assert cw.weight_block(96, 64) == 96
    assert cw.weight_block(512, 256) == 512


BLOCKED_CASES = [  # channels, outputs, height, width, pads, layout; WEIGHT_BLOCK 32 in the test
    (80, 250, 15, 16, (1, 1, 1, 1), cw.Plan(8, 96)),         # F(2x2) chunks: blocks of 32, 32, 16
    (80, 250, 15, 16, (1, 1, 1, 1), cw.Plan(4, 96, 1, 4)),   # F(4x4) chunks, the last chunk short
    (72, 200, 22, 13, (0, 1, 2, 0), cw.Plan(2, 64, 1, 4)),   # F(4x4) chunks within bands, asymmetric pads
    (64, 130, 13, 21, (1, 1, 1, 1), cw.Plan(3, 64, 1, 2)),   # F(2x2) chunks within bands, two whole blocks
]


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("c, m, h, w, pads, layout", BLOCKED_CASES)
def test_blocked_weight_chunks_match_direct_float64(request, monkeypatch, split, c, m, h, w, pads, layout):
    """The chunks' products summed over input-channel blocks of U, the last block short."""
    if split:
        request.getfixturevalue("two_way_splits")
    monkeypatch.setattr(cw, "WEIGHT_BLOCK", 32)
    _assert_matches_float64(5, c, m, h, w, pads, layout)


def test_f4_input_transform_is_bt_d_b_of_every_tile():
    """Bᵀ d B of every 6x6 tile into v[6a + b], 20 channels (blocks of 8, 8, 4), within the counted scratch."""
    rng = np.random.default_rng(6)
    th, tw, width = 3, 5, 4 * 5 + 2
    padded = rng.standard_normal((20, 4 * th + 2, width)).astype(np.float32)
    tiles = np.stack([padded[:, 4 * t:4 * t + 6, 4 * s:4 * s + 6] for t in range(th) for s in range(tw)], -1)
    bt = cw.BT4.astype(np.float64)
    want = np.einsum("ai,citn,bt->abcn", bt, tiles.astype(np.float64), bt).reshape(36, 20, th * tw)
    v = np.full((36, 20, th * tw), np.nan, np.float32)
    scratch = np.full(cw.input_scratch(4, 20, th, width, tw), np.nan, np.float32)
    cw.transform_input(4, padded, (th, tw), v, scratch)
    np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-5)


def test_thin_f4_bands_take_wide_input_blocks_within_the_budget():
    """The VAE decoder's 256-channel convs at 288x288 (SDXL's 36-latent tile) run one tile row a band
    on two threads: 28 input channels a block of the input transform, not 8, still within 32 MB; a
    small image's budget keeps 8 (32 -> 64 channels at 41x39 stays F(4x4))."""
    budget = 32 << 20
    thin = cw.plan(256, 256, (288, 288), budget, 2)
    assert (thin.tile_rows, thin.chunk, thin.tile, thin.in_block) == (1, 256, 4, 28)
    assert cw.scratch_bytes(thin, 256, 256, (288, 288)) <= budget
    small_budget = 32 * 9 * 41 * 39 * 4
    small = cw.plan(32, 64, (41, 39), small_budget, 1)
    assert small.tile == 4 and small.in_block == cw.IN_BLOCK
    assert cw.scratch_bytes(small, 32, 64, (41, 39)) <= small_budget


def test_chunk_layout_transforms_its_channel_blocks_on_every_core(two_way_splits):
    """The chunk layout's input transform (NormConv's normalisation with it) is shared out by channel
    blocks, not run in the caller while the other core waits; each share's padded rows and scratch fit
    in what ``scratch_bytes`` counts (tracemalloc's peak, the output allocated before)."""
    import threading
    import tracemalloc

    c, m, size = 256, 256, 24
    layout = cw.Plan(6, 64, 2, 4)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((c, size, size)).astype(np.float32)
    weight = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    threads: dict[int, set[int]] = {}

    def transform(rows: np.ndarray, first_channel: int = 0) -> None:
        threads.setdefault(threading.get_ident(), set()).add(first_channel)
        np.maximum(rows, 0, out=rows)

    out = np.empty((m, size, size), np.float32)
    tracemalloc.start()
    try:
        cw.winograd_conv3x3(x, weight, [1, 1, 1, 1], out, layout, transform)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(threads) == 2 and set().union(*threads.values()) == {0, 64, 128, 192}, threads
    assert peak <= cw.scratch_bytes(layout, c, m, (size, size)) + 80_000
    want = _reference(np.maximum(x, 0), weight, (1, 1, 1, 1))
    assert np.abs(out - want).max() < 5e-6 * np.abs(want).max()
