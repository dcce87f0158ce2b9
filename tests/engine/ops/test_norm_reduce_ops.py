"""Softmax, normalisations, reductions and ArgMax against onnxruntime (opset variants, fp16)."""

import numpy as np
import pytest

from frame.engine.ops import resolve
from tests.engine.ops.node_check import rand, run_node

I64 = np.int64


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_opset13_axis(op, axis):
    x = rand(3, 4, 5, low=-30, high=30)
    run_node(op, [x], opset=13, rtol=1e-5, atol=1e-6, axis=axis)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_before_opset13_flattens_to_2d(op):
    x = rand(2, 3, 4)
    run_node(op, [x], opset=11, rtol=1e-5, atol=1e-6)
    run_node(op, [x], opset=11, rtol=1e-5, atol=1e-6, axis=2)
    run_node(op, [x], opset=11, rtol=1e-5, atol=1e-6, axis=0)


def test_softmax_float16_and_large_values():
    run_node("Softmax", [rand(2, 7, dtype=np.float16, low=-8, high=8)], opset=13, rtol=2e-3, atol=1e-3)
    (out,) = run_node("Softmax", [np.array([[1000.0, 0.0, -1000.0]], np.float32)], opset=13)
    assert np.isfinite(out).all()


def test_softmax_reuse_writes_in_place():
    x = rand(2, 3, 8)
    out = resolve("Softmax", 13).fn(x, _reuse=True)
    assert out is x or out.base is x


@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_layer_normalization(axis):
    x = rand(2, 3, 4, 5, low=-3, high=5)
    shape = x.shape[axis:]
    run_node("LayerNormalization", [x, rand(*shape, seed=1), rand(*shape, seed=2)], opset=17, rtol=1e-4,
             atol=1e-5, axis=axis, epsilon=1e-5)
    run_node("LayerNormalization", [x, rand(*shape, seed=1)], opset=17, rtol=1e-4, atol=1e-5, axis=axis)


def test_layer_normalization_statistics_outputs():
    x = rand(3, 6)
    run_node("LayerNormalization", [x, rand(6, seed=1), rand(6, seed=2)], opset=17, n_outputs=3, rtol=1e-4,
             atol=1e-5)


def test_layer_normalization_float16():
    x = rand(2, 5, 8, dtype=np.float16)
    run_node("LayerNormalization", [x, rand(8, dtype=np.float16, seed=1), rand(8, dtype=np.float16, seed=2)],
             opset=17, rtol=1e-2, atol=1e-2)


def test_instance_normalization():
    x = rand(2, 3, 5, 6, low=-1, high=4)
    run_node("InstanceNormalization", [x, rand(3, seed=1), rand(3, seed=2)], rtol=1e-4, atol=1e-5, epsilon=1e-3)
    run_node("InstanceNormalization", [rand(2, 3, 7), rand(3, seed=1), rand(3, seed=2)], rtol=1e-4, atol=1e-5)


def _group_norm_reference(x, scale, bias, groups, eps):
    n, c = x.shape[:2]
    rows = x.reshape(n, groups, -1).astype(np.float64)
    y = (rows - rows.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


def test_group_normalization_opset21_per_channel():
    x, scale, bias = rand(2, 6, 4, 4), rand(6, seed=1), rand(6, seed=2)
    run_node("GroupNormalization", [x, scale, bias], opset=21, rtol=1e-4, atol=1e-5, num_groups=3, epsilon=1e-5)
    out = resolve("GroupNormalization", 21).fn(x, scale, bias, num_groups=3, epsilon=1e-5)
    np.testing.assert_allclose(out, _group_norm_reference(x, scale, bias, 3, 1e-5), rtol=1e-4, atol=1e-5)


def test_group_normalization_opset18_per_group_scale():
    x, scale, bias = rand(2, 6, 3, 3), rand(3, seed=1), rand(3, seed=2)
    out = resolve("GroupNormalization", 18).fn(x, scale, bias, num_groups=3)
    want = _group_norm_reference(x, np.repeat(scale, 2), np.repeat(bias, 2), 3, 1e-5)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_batch_normalization_inference():
    x = rand(2, 3, 4, 4)
    stats = [rand(3, seed=1), rand(3, seed=2), rand(3, seed=3), rand(3, seed=4, low=0.1, high=2)]
    run_node("BatchNormalization", [x, *stats], opset=15, rtol=1e-4, atol=1e-5)


REDUCE_OPS = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSumExp"]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes", [None, [1], [-1, 0]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_attribute(op, axes, keepdims):
    attrs = {"keepdims": keepdims} | ({} if axes is None else {"axes": axes})
    run_node(op, [rand(2, 3, 4, low=0.5, high=1.5)], opset=11, rtol=1e-5, atol=1e-5, **attrs)


@pytest.mark.parametrize("op", REDUCE_OPS + ["ReduceLogSum"])
def test_reduce_axes_input(op):
    x = rand(2, 3, 4, low=0.5, high=1.5)
    run_node(op, [x, np.array([-1, 1], I64)], opset=18, rtol=1e-5, atol=1e-5)
    run_node(op, [x, np.array([0], I64)], opset=18, rtol=1e-5, atol=1e-5, keepdims=0)
    run_node(op, [x], opset=18, rtol=1e-5, atol=1e-5)
    run_node(op, [x, np.array([], I64)], opset=18, rtol=1e-5, atol=1e-5, noop_with_empty_axes=1)


def test_reduce_sum_axes_input_from_opset13_and_int64():
    run_node("ReduceSum", [np.arange(24, dtype=I64).reshape(2, 3, 4), np.array([1], I64)], opset=13)
    run_node("ReduceMean", [rand(2, 8, dtype=np.float16)], opset=13, rtol=1e-3, axes=[1])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis, keepdims, last", [(0, 1, 0), (-1, 0, 0), (1, 1, 1)])
def test_arg_reductions(op, axis, keepdims, last):
    x = np.array([[3, 1, 3, 0], [2, 2, 0, 0], [1, 5, 5, 1]], np.float32)
    run_node(op, [x], opset=13, axis=axis, keepdims=keepdims, select_last_index=last)
    run_node(op, [np.array([[4, 9, 9], [1, 0, 1]], I64)], opset=13, axis=axis, keepdims=keepdims,
             select_last_index=last)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_top_k(largest, axis):
    x = np.array([[3, 1, 3, 0], [2, 2, 0, 0], [1, 5, 5, 1]], np.float32)
    run_node("TopK", [x, np.array([2], I64)], opset=11, n_outputs=2, axis=axis, largest=largest)


def test_instance_normalization_identity_affine_as_in_exported_group_norm():
    x = rand(1, 4, 3, 5)
    run_node("InstanceNormalization", [x, np.ones(4, np.float32), np.zeros(4, np.float32)], rtol=1e-4, atol=1e-5)
