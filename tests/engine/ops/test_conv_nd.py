"""3-D Conv, ConvTranspose and pooling, ConvTranspose with groups/dilations/output_padding, and
ConvInteger, against onnxruntime."""

import numpy as np
import pytest

from frame.engine.ops import bind_node
from tests.engine.ops.node_check import make_node, rand, run_node


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
    ((2, 4, 6, 5, 8), (6, 2, 3, 1, 2), {"group": 2, "strides": [2, 1, 3], "pads": [1, 0, 1, 0, 0, 1]}),
    ((1, 2, 7, 7, 7), (3, 2, 2, 3, 2), {"dilations": [2, 1, 3], "pads": [1, 1, 3, 0, 1, 0]}),
    ((1, 2, 7, 6, 5), (3, 2, 2, 3, 2), {"strides": [2, 1, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 4, 6, 6, 6), (4, 1, 3, 3, 3), {"group": 4, "auto_pad": "VALID", "strides": [2, 2, 2]}),
])
def test_conv_3d(x_shape, w_shape, attrs):
    run_node("Conv", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)], rtol=1e-4,
             atol=1e-5, **attrs)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 6, 4, 5), (6, 2, 3, 3), {"group": 3, "strides": [2, 3], "dilations": [2, 1], "output_padding": [1, 2],
                                  "pads": [1, 0, 0, 1]}),
    ((2, 4, 3, 3), (4, 3, 2, 2), {"group": 2, "strides": [2, 2], "output_shape": [5, 6]}),
    ((1, 2, 5, 4), (2, 2, 3, 3), {"strides": [3, 2], "output_padding": [2, 1], "auto_pad": "SAME_LOWER"}),
    ((1, 4, 9), (4, 1, 3), {"group": 4, "strides": [2], "dilations": [3], "output_padding": [1]}),
])
def test_conv_transpose_groups_dilations_output_padding(x_shape, w_shape, attrs):
    bias = rand(w_shape[1] * attrs.get("group", 1), seed=3)
    run_node("ConvTranspose", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), bias], rtol=1e-4, atol=1e-5, **attrs)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 2, 3, 4, 3), (2, 3, 2, 2, 2), {"strides": [2, 2, 2]}),
    ((1, 4, 3, 3, 2), (4, 2, 3, 2, 3), {"group": 2, "strides": [2, 1, 2], "dilations": [1, 2, 1],
                                        "output_padding": [1, 0, 1], "pads": [1, 0, 1, 0, 1, 1]}),
    ((1, 2, 2, 3, 3), (2, 1, 3, 3, 3), {"strides": [2, 2, 2], "output_shape": [4, 7, 6]}),
])
def test_conv_transpose_3d(x_shape, w_shape, attrs):
    bias = rand(w_shape[1] * attrs.get("group", 1), seed=3)
    run_node("ConvTranspose", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), bias], rtol=1e-4, atol=1e-5, **attrs)


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [1, 1, 0, 0, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3, 3], "dilations": [2, 1, 1], "ceil_mode": 1, "strides": [2, 2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 2, 3], "pads": [1, 0, 1, 1, 1, 0], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2], "ceil_mode": 1}),
])
def test_pool_3d(op, attrs):
    run_node(op, [rand(2, 3, 7, 6, 7, seed=1)], opset=19, rtol=1e-5, atol=1e-6, **attrs)


@pytest.mark.parametrize("dtypes", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1], "strides": [2, 2]},
                                   {"group": 2, "dilations": [2, 1], "pads": [2, 1, 1, 0]},
                                   {"auto_pad": "SAME_LOWER", "strides": [2, 2]}])
def test_conv_integer(dtypes, attrs):
    rng = np.random.default_rng(0)
    x_dtype, w_dtype = dtypes
    x = rng.integers(np.iinfo(x_dtype).min, np.iinfo(x_dtype).max, (1, 4, 7, 8), endpoint=True).astype(x_dtype)
    w = rng.integers(np.iinfo(w_dtype).min, np.iinfo(w_dtype).max, (6, 4 // attrs.get("group", 1), 3, 3),
                     endpoint=True).astype(w_dtype)
    x_zp = np.array(rng.integers(0, 40), x_dtype)
    w_zp = np.array(3, w_dtype)
    run_node("ConvInteger", [x, w, x_zp, w_zp], opset=10, **attrs)
    run_node("ConvInteger", [x, w], opset=10, **attrs)


def test_conv_integer_per_channel_weight_zero_points():
    """onnxruntime supports only a scalar weight zero point; per output channel is checked against exact
    integer arithmetic (the per-channel form with each channel's own zero point)."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 255, (2, 3, 6, 6), endpoint=True).astype(np.uint8)
    w = rng.integers(0, 255, (5, 3, 2, 2), endpoint=True).astype(np.uint8)
    w_zp = np.arange(5, dtype=np.uint8) * 7
    node = make_node("ConvInteger", [True] * 4, 1, pads=[0, 1, 1, 0])
    spec, attrs = bind_node(node, 10)
    got = spec.fn(x, w, np.array(128, np.uint8), w_zp, **attrs)
    for channel in range(5):
        one = spec.fn(x, w[channel:channel + 1], np.array(128, np.uint8), w_zp[channel:channel + 1], **attrs)
        np.testing.assert_array_equal(got[:, channel:channel + 1], one)
    want = run_node("ConvInteger", [x, w[2:3], np.array(128, np.uint8), w_zp[2:3]], opset=10, pads=[0, 1, 1, 0])[0]
    np.testing.assert_array_equal(got[:, 2:3], want)
