"""Depthwise and grouped convolutions (ops.conv_im2col) against onnxruntime: channel multipliers,
strides (equal and not), dilations, asymmetric pads, batches, blocks split by rows and channels,
and the two-core path."""

import pytest

from frame.engine.ops import conv_im2col
from tests.engine.ops.node_check import rand, run_node

DEPTHWISE = [
    ((1, 8, 9, 11), (8, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 6, 15, 20), (6, 1, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 6, 15, 20), (6, 1, 5, 5), {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((1, 4, 10, 9), (12, 1, 3, 3), {"group": 4, "pads": [1, 0, 2, 1]}),  # channel multiplier 3
    ((1, 5, 13, 12), (5, 1, 3, 3), {"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ((1, 5, 13, 12), (5, 1, 3, 2), {"strides": [2, 1], "pads": [1, 0, 1, 1]}),  # unequal strides: 2-D views
    ((1, 3, 8, 8), (3, 1, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [3, 3]}),
    ((1, 4, 7, 7), (4, 1, 7, 7), {}),  # kernel as large as the image, no padding
    ((1, 6, 1, 30), (6, 1, 1, 5), {"pads": [0, 2, 0, 2]}),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", DEPTHWISE)
@pytest.mark.parametrize("bias", [True, False])
def test_depthwise(x_shape, w_shape, attrs, bias):
    attrs = {"group": x_shape[1], **attrs}
    inputs = [rand(*x_shape, seed=1), rand(*w_shape, seed=2)] + ([rand(w_shape[0], seed=3)] if bias else [])
    run_node("Conv", inputs, rtol=1e-4, atol=1e-5, **attrs)


def test_depthwise_1d():
    run_node("Conv", [rand(2, 4, 17, seed=1), rand(4, 1, 5, seed=2)], rtol=1e-4, atol=1e-5, group=4, pads=[2, 2],
             strides=[2])


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 8, 9, 10), (8, 2, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((2, 12, 11, 7), (6, 4, 3, 3), {"group": 3, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 0, 1]}),
    ((1, 6, 8, 8), (9, 2, 1, 1), {"group": 3}),
    ((1, 4, 9, 9), (8, 2, 3, 3), {"group": 2, "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
])
def test_grouped(x_shape, w_shape, attrs):
    run_node("Conv", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)], rtol=1e-4,
             atol=1e-5, **attrs)


def test_blocks_split_channels_and_rows_and_run_on_two_cores(monkeypatch):
    monkeypatch.setattr(conv_im2col, "COLUMN_BLOCK_ELEMENTS", 9 * 37)  # one channel, rows in pieces
    monkeypatch.setattr(conv_im2col, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(conv_im2col, "GROUPED_BAND_BYTES", 4 * 8 * 9 * 10)
    run_node("Conv", [rand(2, 6, 14, 15, seed=1), rand(6, 1, 3, 3, seed=2)], rtol=1e-4, atol=1e-5, group=6,
             pads=[1, 1, 1, 1])
    run_node("Conv", [rand(1, 6, 14, 15, seed=1), rand(6, 1, 3, 3, seed=2)], rtol=1e-4, atol=1e-5, group=6,
             pads=[1, 1, 1, 1], strides=[2, 2])
    monkeypatch.setattr(conv_im2col, "COLUMN_BLOCK_ELEMENTS", 9 * 2 * 200)  # two channels per block
    run_node("Conv", [rand(1, 5, 12, 13, seed=1), rand(5, 1, 3, 3, seed=2)], rtol=1e-4, atol=1e-5, group=5,
             pads=[1, 1, 1, 1])
    run_node("Conv", [rand(1, 8, 9, 10, seed=1), rand(8, 2, 3, 3, seed=2)], rtol=1e-4, atol=1e-5, group=4,
             pads=[1, 1, 1, 1])


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 16, 9, 11), (4, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 12, 10, 9), (3, 12, 3, 2), {"pads": [2, 0, 1, 1], "dilations": [2, 3]}),
    ((1, 8, 7, 7), (2, 8, 3, 3), {}),
    ((1, 8, 6, 6), (2, 8, 3, 3), {"auto_pad": "SAME_LOWER"}),
    ((1, 16, 13), (4, 16, 5), {"pads": [2, 1]}),
])
@pytest.mark.parametrize("band_bytes", [None, 1])
def test_narrow_conv(monkeypatch, x_shape, w_shape, attrs, band_bytes):
    """Many more input than output channels, stride 1: the band GEMM + shifted tap sums path."""
    if band_bytes is not None:
        monkeypatch.setattr(conv_im2col, "NARROW_BAND_BYTES", band_bytes)  # one output row per band
    run_node("Conv", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)], rtol=1e-4,
             atol=1e-4, **attrs)
