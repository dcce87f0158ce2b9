"""MatMul, Gemm, Conv and ConvTranspose against onnxruntime, including fp16 weights in fp32 graphs."""

import numpy as np
import pytest

from frame.engine.ops import UnsupportedOp, bind_node, resolve
from tests.engine.ops.node_check import make_node, rand, run_node


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                    ((4,), (4, 3)), ((2, 3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (2, 4, 6))])
def test_matmul_broadcasting(shapes):
    run_node("MatMul", [rand(*shapes[0], seed=1), rand(*shapes[1], seed=2)], rtol=1e-5, atol=1e-5)


def test_matmul_float16_and_int():
    run_node("MatMul", [rand(3, 8, dtype=np.float16), rand(8, 2, dtype=np.float16, seed=1)], rtol=2e-3, atol=2e-3)
    run_node("MatMul", [np.arange(6, dtype=np.int64).reshape(2, 3), np.arange(6, dtype=np.int64).reshape(3, 2)])


def test_matmul_with_fp16_weight_computes_float32():
    x, w = rand(2, 5, 8), rand(8, 3, seed=1)
    out = resolve("MatMul", 17).fn(x, w.astype(np.float16))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x @ w.astype(np.float16).astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("attrs", [{}, {"transA": 1}, {"transB": 1}, {"alpha": 0.5, "beta": 2.0},
                                   {"transA": 1, "transB": 1, "alpha": -1.0}])
@pytest.mark.parametrize("c_shape", [None, (5,), (3, 5), (1, 1), ()])
def test_gemm(attrs, c_shape):
    a = rand(4, 3, seed=1) if attrs.get("transA") else rand(3, 4, seed=1)
    b = rand(5, 4, seed=2) if attrs.get("transB") else rand(4, 5, seed=2)
    inputs = [a, b] + ([] if c_shape is None else [rand(*c_shape, seed=3)])
    run_node("Gemm", inputs, rtol=1e-5, atol=1e-5, **attrs)


def test_gemm_fp16_weight():
    a, b, c = rand(2, 4), rand(3, 4, seed=1), rand(3, seed=2)
    out = resolve("Gemm", 13).fn(a, b.astype(np.float16), c.astype(np.float16), transB=1)
    assert out.dtype == np.float32
    want = a @ b.astype(np.float16).astype(np.float32).T + c.astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-6)


CONV_CASES = [
    ((1, 4, 7, 9), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 9, 8), (5, 4, 3, 2), {"pads": [2, 0, 1, 1], "strides": [2, 3], "dilations": [2, 1]}),
    ((1, 6, 6, 6), (6, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4}),
    ((1, 4, 5, 5), (8, 4, 1, 1), {}),
    ((2, 4, 5, 5), (8, 4, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 7, 7), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 7, 7), (4, 3, 4, 4), {"auto_pad": "SAME_LOWER"}),
    ((1, 3, 7, 7), (4, 3, 3, 3), {"auto_pad": "VALID", "dilations": [3, 2]}),
    ((1, 3, 12), (5, 3, 3), {"pads": [1, 2], "strides": [2]}),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv(x_shape, w_shape, attrs, bias):
    inputs = [rand(*x_shape, seed=1), rand(*w_shape, seed=2)] + ([rand(w_shape[0], seed=3)] if bias else [])
    run_node("Conv", inputs, rtol=1e-4, atol=1e-5, **attrs)


def test_conv_float16_and_fp16_weight():
    x, w, b = rand(1, 4, 6, 6), rand(5, 4, 3, 3, seed=1), rand(5, seed=2)
    run_node("Conv", [x.astype(np.float16), w.astype(np.float16), b.astype(np.float16)], rtol=1e-2, atol=1e-2,
             pads=[1, 1, 1, 1])
    conv = resolve("Conv", 11).fn
    out = conv(x, w.astype(np.float16), b.astype(np.float16), pads=[1, 1, 1, 1])
    want = conv(x, w.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32), pads=[1, 1, 1, 1])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, want)


def test_conv_rejects_4d_and_bad_auto_pad():
    with pytest.raises(UnsupportedOp, match="kernel_shape"):
        bind_node(make_node("Conv", [True, True], 1, kernel_shape=[3, 3, 3, 3]), 11)
    with pytest.raises(UnsupportedOp, match="auto_pad"):
        bind_node(make_node("Conv", [True, True], 1, auto_pad="SAME"), 11)


def test_conv_channel_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="channels"):
        resolve("Conv", 11).fn(rand(1, 3, 5, 5), rand(4, 2, 3, 3))


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ((1, 4, 4, 5), (4, 2, 2, 3), {"group": 2, "dilations": [2, 1]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [9, 8]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 6), (3, 2, 4), {"strides": [2], "pads": [1, 1]}),
])
def test_conv_transpose(x_shape, w_shape, attrs):
    run_node("ConvTranspose", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[1] * attrs.get("group", 1),
             seed=3)], rtol=1e-4, atol=1e-5, **attrs)


def test_conv_in_several_row_bands(monkeypatch):
    """A tiny column budget forces many bands, including a shorter last one."""
    from frame.engine.ops import conv as conv_module
    monkeypatch.setattr(conv_module, "COLUMN_BUDGET_BYTES", 4 * 3 * 9 * 5 * 3)
    run_node("Conv", [rand(1, 3, 11, 9, seed=1), rand(4, 3, 3, 3, seed=2)], rtol=1e-4, atol=1e-5, pads=[1, 1, 1, 1],
             strides=[2, 2])
    run_node("Conv", [rand(2, 4, 13, 6, seed=1), rand(4, 2, 3, 3, seed=2)], rtol=1e-4, atol=1e-5, group=2,
             dilations=[2, 1])


@pytest.mark.parametrize("equation, shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]),
                                              ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("i,i", [(5,), (5,)])])
def test_einsum(equation, shapes):
    run_node("Einsum", [rand(*s, seed=i) for i, s in enumerate(shapes)], opset=12, rtol=1e-5, atol=1e-5,
             equation=equation)


def test_conv_kernel_larger_than_input_is_a_clear_error():
    with pytest.raises(ValueError, match="larger than the padded input"):
        resolve("Conv", 11).fn(rand(1, 2, 2, 2), rand(3, 2, 3, 3))


BANDED_CASES = [
    ((1, 3, 11, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((2, 4, 13, 6), (4, 2, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 0, 1]}),
    ((1, 3, 9, 7), (5, 3, 1, 1), {"pads": [3, 1, 2, 0]}),  # first/last bands read only zero rows
    ((1, 2, 10, 5), (3, 2, 3, 2), {"pads": [0, 2, 3, 0], "strides": [3, 1], "dilations": [1, 2]}),
    ((1, 4, 12, 7), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 1]}),
    ((1, 3, 12, 8), (2, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}),
    ((1, 3, 17, 5), (6, 3, 5, 5), {"pads": [4, 2, 1, 2], "strides": [2, 2]}),
    ((2, 3, 23), (4, 3, 3), {"pads": [2, 0], "strides": [2]}),
]


@pytest.mark.parametrize("budget_rows", [1, 2, 3])
@pytest.mark.parametrize("x_shape, w_shape, attrs", BANDED_CASES)
def test_conv_banded_matches_onnxruntime(monkeypatch, budget_rows, x_shape, w_shape, attrs):
    """Bands of 1-3 output rows: every band boundary, a short last band, pad rows cleared on reuse."""
    from frame.engine.ops import conv as conv_module
    depth = w_shape[1] * int(np.prod(w_shape[2:]))
    monkeypatch.setattr(conv_module, "COLUMN_BUDGET_BYTES", depth * x_shape[-1] * 4 * budget_rows)
    run_node("Conv", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)], rtol=1e-4,
             atol=1e-5, **attrs)


@pytest.mark.parametrize("ho, wo, depth", [(64, 64, 2880), (512, 512, 2304), (512, 512, 1152), (8, 8, 11520),
                                           (7, 3, 9), (1, 100000, 4), (37, 1000, 2000)])
def test_band_rows_covers_the_image_within_budget(ho, wo, depth):
    from frame.engine.ops.conv import BAND_COLUMNS, COLUMN_BUDGET_BYTES, band_rows
    rows = band_rows((ho, wo), depth)
    assert 1 <= rows <= ho
    assert rows == 1 or rows * wo * depth * 4 <= COLUMN_BUDGET_BYTES  # memory bound
    bands = -(-ho // rows)
    assert ho - (bands - 1) * rows >= rows - bands  # balanced: the last band is not a sliver
    widest = max(1, min(ho, -(-BAND_COLUMNS // wo), COLUMN_BUDGET_BYTES // (depth * wo * 4)))
    assert bands == -(-ho // widest)  # as few bands as the width target and the budget allow: wide GEMMs


def test_conv_odd_sizes_single_band_with_bias_and_fp16_weights():
    x, w, b = rand(1, 5, 13, 11, seed=1), rand(7, 5, 3, 3, seed=2), rand(7, seed=3)
    run_node("Conv", [x, w, b], rtol=1e-4, atol=1e-5, pads=[0, 1, 2, 1])
    out = resolve("Conv", 11).fn(x, w.astype(np.float16), b, pads=[0, 1, 2, 1])
    want = resolve("Conv", 11).fn(x, w.astype(np.float16).astype(np.float32), b, pads=[0, 1, 2, 1])
    assert out.dtype == np.float32 and out.shape == (1, 7, 13, 11)
    np.testing.assert_array_equal(out, want)


def _resize_conv_reference(x, w, b, group, mode):
    """onnxruntime on the two-node graph the exporters emit: Resize(nearest, x2) -> Conv(3x3, pads 1)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    resize_attrs = {"asymmetric": {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
                    "half_pixel": {"coordinate_transformation_mode": "half_pixel",
                                   "nearest_mode": "round_prefer_floor"}}[mode]
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["up"], mode="nearest", **resize_attrs),
             helper.make_node("Conv", ["up", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=group)]
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    graph = helper.make_graph(nodes, "up_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("x_shape, w_shape, group, mode, budget_rows", [
    ((1, 4, 5, 7), (6, 4, 3, 3), 1, "asymmetric", None),
    ((2, 3, 6, 4), (5, 3, 3, 3), 1, "half_pixel", None),
    ((1, 4, 9, 6), (4, 2, 3, 3), 2, "asymmetric", 2),   # groups, several bands per phase
    ((1, 3, 1, 1), (2, 3, 3, 3), 1, "asymmetric", 1),   # 1x1 image: every tap but the centre reads padding
])
def test_upsample2x_conv3x3_matches_resize_then_conv(monkeypatch, fused, x_shape, w_shape, group, mode, budget_rows):
    """Both the phase-decomposed path and the small-image fallback (upsample, then the plain conv)."""
    from frame.engine.ops import conv as conv_module
    monkeypatch.setattr(conv_module, "FUSED_MIN_INPUT_PIXELS", 0 if fused else 10**9)
    if budget_rows:
        monkeypatch.setattr(conv_module, "COLUMN_BUDGET_BYTES", w_shape[1] * 4 * x_shape[-1] * 4 * budget_rows)
    x, w, b = rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)
    got = conv_module.upsample2x_conv3x3(x, w, b, group=group)
    want = _resize_conv_reference(x, w, b, group, mode)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_upsample2x_conv3x3_rejects_other_kernels():
    from frame.engine.ops.conv import upsample2x_conv3x3
    with pytest.raises(ValueError, match="3x3 weight"):
        upsample2x_conv3x3(rand(1, 3, 4, 4), rand(2, 3, 1, 1))
    with pytest.raises(ValueError, match="group=2"):
        upsample2x_conv3x3(rand(1, 3, 4, 4), rand(2, 3, 3, 3), group=2)
