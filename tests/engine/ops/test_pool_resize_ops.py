"""Pooling and Resize/Upsample against onnxruntime: every coordinate mode, nearest mode and opset form."""

import numpy as np
import pytest

from frame.engine.ops import UnsupportedOp, bind_node
from tests.engine.ops.node_check import make_node, rand, run_node

F32 = np.float32


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [0, 1, 1, 0]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
])
def test_max_pool(attrs):
    run_node("MaxPool", [rand(2, 3, 7, 8)], opset=12, **attrs)


def test_max_pool_1d_and_int():
    run_node("MaxPool", [rand(1, 2, 9)], opset=12, kernel_shape=[3], strides=[2])
    run_node("MaxPool", [np.arange(32, dtype=np.uint8).reshape(1, 2, 4, 4)], opset=12, kernel_shape=[2, 2])


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1], "count_include_pad": 1},
])
def test_average_pool(attrs):
    run_node("AveragePool", [rand(1, 2, 7, 8)], opset=19, rtol=1e-5, **attrs)


def test_global_pools():
    run_node("GlobalAveragePool", [rand(2, 3, 4, 5)])
    run_node("GlobalMaxPool", [rand(2, 3, 4, 5)])


def test_pool_rejects_missing_kernel_shape():
    with pytest.raises(UnsupportedOp, match="kernel_shape"):
        bind_node(make_node("MaxPool", [True], 1), 12)


COORDINATE_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 0.6, 1.7)])
def test_resize_nearest_every_mode(coordinate_mode, nearest_mode, scales):
    x = rand(1, 2, 5, 6)
    run_node("Resize", [x, None, np.array(scales, F32)], opset=13, mode="nearest",
             coordinate_transformation_mode=coordinate_mode, nearest_mode=nearest_mode)


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_linear_cubic(coordinate_mode, mode):
    if coordinate_mode == "tf_half_pixel_for_nn":
        pytest.skip("onnxruntime only accepts tf_half_pixel_for_nn with mode=nearest")
    x = rand(1, 2, 5, 6)
    run_node("Resize", [x, None, np.array([1, 1, 2, 0.5], F32)], opset=13, rtol=1e-4, atol=1e-5, mode=mode,
             coordinate_transformation_mode=coordinate_mode)
    run_node("Resize", [x, None, None, np.array([1, 2, 8, 4], np.int64)], opset=13, rtol=1e-4, atol=1e-5,
             mode=mode, coordinate_transformation_mode=coordinate_mode)


def test_resize_cubic_options_and_half_pixel_symmetric():
    x = rand(1, 1, 6, 6)
    run_node("Resize", [x, None, np.array([1, 1, 1.5, 0.8], F32)], opset=13, rtol=1e-4, atol=1e-5, mode="cubic",
             cubic_coeff_a=-0.5, exclude_outside=1)
    run_node("Resize", [x, None, np.array([1, 1, 1.5, 0.7], F32)], opset=19, rtol=1e-4, atol=1e-5, mode="linear",
             coordinate_transformation_mode="half_pixel_symmetric")


def test_resize_tf_crop_and_resize():
    x = rand(1, 1, 6, 6)
    roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 0.8], F32)
    for mode in ("nearest", "linear"):
        run_node("Resize", [x, roi, None, np.array([1, 1, 4, 5], np.int64)], opset=13, rtol=1e-4, atol=1e-5,
                 mode=mode, coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)


def test_resize_opset11_with_empty_scales_and_exporter_form():
    x = rand(1, 3, 4, 4)
    run_node("Resize", [x, np.array([], F32), np.array([], F32), np.array([1, 3, 8, 8], np.int64)], opset=11)
    run_node("Resize", [x, None, np.array([1, 1, 2, 2], F32)], opset=18, mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor", antialias=0,
             keep_aspect_ratio_policy="stretch", cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0)


def test_resize_opset18_axes_and_aspect_policy():
    x = rand(1, 2, 4, 6)
    run_node("Resize", [x, None, np.array([2, 0.5], F32)], opset=18, mode="linear", axes=[2, 3])
    run_node("Resize", [x, None, None, np.array([8, 9], np.int64)], opset=18, mode="nearest", axes=[-2, -1])
    # Positive axes only here: onnxruntime 1.32 ignores the policy when axes are negative.
    for policy in ("not_larger", "not_smaller"):
        run_node("Resize", [x, None, None, np.array([8, 9], np.int64)], opset=18, mode="nearest", axes=[2, 3],
                 keep_aspect_ratio_policy=policy)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_opset10_and_upsample(mode):
    x = rand(1, 2, 3, 4)
    run_node("Resize", [x, np.array([1, 1, 2, 1.5], F32)], opset=10, mode=mode)
    run_node("Upsample", [x, np.array([1, 1, 2, 3], F32)], opset=9, mode=mode)


def test_resize_keeps_int_and_fp16_dtypes():
    run_node("Resize", [np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4), None, np.array([1, 1, 2, 2], F32)],
             opset=13)
    run_node("Resize", [rand(1, 1, 4, 4, dtype=np.float16), None, np.array([1, 1, 2, 2], F32)], opset=13,
             mode="linear", rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coordinate_mode", ["half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("exclude_outside", [0, 1])
def test_resize_antialias_when_shrinking(mode, coordinate_mode, exclude_outside):
    x = rand(1, 2, 9, 11)
    run_node("Resize", [x, None, np.array([1, 1, 0.35, 1.5], F32)], opset=18, rtol=1e-4, atol=1e-5, mode=mode,
             antialias=1, coordinate_transformation_mode=coordinate_mode, exclude_outside=exclude_outside)
    run_node("Resize", [x, None, None, np.array([1, 2, 4, 5], np.int64)], opset=18, rtol=1e-4, atol=1e-5,
             mode=mode, antialias=1, coordinate_transformation_mode=coordinate_mode)


def test_resize_rejects_bad_attribute_values():
    for attrs in ({"mode": "area"}, {"coordinate_transformation_mode": "center"}, {"nearest_mode": "even"}):
        with pytest.raises(UnsupportedOp, match="Resize attribute"):
            bind_node(make_node("Resize", [True, False, True], 1, **attrs), 18)
