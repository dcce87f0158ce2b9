"""Winograd F(2x2, 3x3) convs (ops.conv_winograd): both layouts, odd sizes and pads, split over threads."""

from __future__ import annotations

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
]


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("c, m, h, w, pads, layout", CASES)
def test_winograd_matches_direct_float64(request, split, c, m, h, w, pads, layout):
    if split:
        request.getfixturevalue("two_way_splits")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    weight = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    want = _reference(x, weight, pads)
    out = np.full(want.shape, np.nan, np.float32)
    cw.winograd_conv3x3(x, weight, pads, out, layout)
    assert np.abs(out - want).max() < 1e-6 * np.abs(want).max()


def test_both_layouts_are_planned_and_budgets_respected():
    chunks = cw.plan(1280, 1280, (16, 16), 32 << 20, 2)
    assert chunks == cw.Plan(8, 64, 2)  # U would be 105 MB: chunks of output channels, shared by 2 threads
    bands = cw.plan(640, 320, (64, 64), 32 << 20, 2)  # whole V (42 MB) too big: whole U (13 MB), bands
    assert bands.chunk == 320 and bands.threads == 2 and -(-32 // bands.tile_rows) >= 4
    tight = cw.plan(960, 320, (64, 64), 32 << 20, 2)
    assert tight.threads == 1 and tight.tile_rows >= 2  # one band at a time, its GEMMs split
    assert cw.plan(1920, 640, (32, 32), 32 << 20, 1) is None  # neither layout fits the budget
    assert cw.plan(1280, 1280, (8, 8), 32 << 20, 1) is None  # 16 tiles: im2col
    assert cw.plan(4, 320, (64, 64), 32 << 20, 1) is None  # too few input channels


@pytest.mark.parametrize("split", [False, True])
def test_conv_op_uses_winograd_and_matches_onnxruntime(request, split, monkeypatch):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    if split:
        request.getfixturevalue("two_way_splits")
    used = []
    original = cw.winograd_conv3x3
    monkeypatch.setattr(cw, "winograd_conv3x3", lambda *a, **k: used.append(1) or original(*a, **k))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 24, 33, 31)).astype(np.float32)
    w = (rng.standard_normal((40, 24, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    got = conv_module.conv(x, w, b, pads=[1, 1, 1, 1])
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert used == [1, 1]  # one call per image
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_weight_transform_is_g_g_gt():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    want = np.einsum("ai,mcij,bj->abmc", cw._G, w.astype(np.float64), cw._G).reshape(16, 5, 3)
    np.testing.assert_allclose(cw.transform_weight(w, step=4), want, rtol=1e-6, atol=1e-6)
