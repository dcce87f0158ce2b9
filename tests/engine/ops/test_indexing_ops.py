"""Gather/scatter, Cast, Constant, ConstantOfShape, Range and friends against onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.engine.ops import UnsupportedOp, bind_node, resolve
from tests.engine.ops.node_check import make_node, rand, run_node

I64 = np.int64


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis):
    x = rand(4, 5, 6)
    run_node("Gather", [x, np.array([[0, -1], [2, 1]], I64)], axis=axis)
    run_node("Gather", [x, np.array(-2, I64)], axis=axis)
    run_node("Gather", [x, np.array([1, 0], np.int32)], axis=axis)


def test_gather_rejects_out_of_range_index():
    with pytest.raises(IndexError, match="Gather"):
        resolve("Gather", 13).fn(rand(3, 2), np.array([3], I64))


def test_gather_elements_and_nd():
    x = rand(3, 4)
    run_node("GatherElements", [x, np.array([[0, 2, -1, 1], [2, 0, 0, 1]], I64)], axis=0)
    run_node("GatherElements", [x, np.array([[3, 0], [1, -1], [2, 2]], I64)], axis=-1)
    y = rand(2, 3, 4)
    run_node("GatherND", [y, np.array([[0, 1], [1, 2]], I64)])
    run_node("GatherND", [y, np.array([[1], [0]], I64)], batch_dims=1)
    run_node("GatherND", [y, np.array([[[0, 1]], [[2, 3]]], I64)], batch_dims=1)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    data = rand(4, 3)
    opset = 11 if reduction == "none" else 18
    attrs = {} if reduction == "none" else {"reduction": reduction}
    indices = np.array([[1], [3]], I64) if reduction == "none" else np.array([[1], [3], [1]], I64)
    run_node("ScatterND", [data, indices, rand(len(indices), 3, seed=4)], opset=opset, **attrs)
    run_node("ScatterND", [data, np.array([[0, 1], [-1, 2]], I64), rand(2, seed=5)], opset=opset, **attrs)


def test_scatter_elements_and_rejects_bad_reduction():
    data = rand(3, 4)
    run_node("ScatterElements", [data, np.array([[1, 0, 2, -1]], I64), rand(1, 4, seed=3)], axis=0)
    run_node("ScatterElements", [data, np.array([[1, 1], [0, 2]], I64), rand(2, 2, seed=3)], opset=18,
             axis=1, reduction="add")
    with pytest.raises(UnsupportedOp, match="reduction"):
        bind_node(make_node("ScatterND", [True, True, True], 1, reduction="avg"), 18)


@pytest.mark.parametrize("to, src", [
    (TensorProto.FLOAT, np.array([1, -2, 3], I64)),
    (TensorProto.INT64, np.array([1.7, -2.7, 0.2], np.float32)),
    (TensorProto.FLOAT16, rand(5)),
    (TensorProto.FLOAT, rand(5, dtype=np.float16)),
    (TensorProto.BOOL, np.array([0.0, 2.0, -1.0], np.float32)),
    (TensorProto.INT32, np.array([True, False])),
    (TensorProto.FLOAT, rand(3)),
])
def test_cast(to, src):
    run_node("Cast", [src], to=to)


def test_cast_rejects_unsupported_type_and_missing_to():
    with pytest.raises(UnsupportedOp, match="'to'"):
        bind_node(make_node("Cast", [True], 1, to=TensorProto.BFLOAT16), 17)
    with pytest.raises(UnsupportedOp, match="'to'"):
        bind_node(make_node("Cast", [True], 1), 17)


def test_cast_like():
    run_node("CastLike", [np.array([1.5, -2.5], np.float32), np.zeros(1, np.float16)], opset=15)


def test_constant_forms():
    tensor = numpy_helper.from_array(rand(2, 3))
    for attrs in ({"value": tensor}, {"value_float": 1.5}, {"value_floats": [1.0, 2.0]},
                  {"value_int": 3}, {"value_ints": [1, 2]}):
        run_node("Constant", [], opset=13, **attrs)
    with pytest.raises(UnsupportedOp, match="value"):
        bind_node(make_node("Constant", [], 1, value_float=1.0, value_int=2), 13)


def test_constant_of_shape():
    run_node("ConstantOfShape", [np.array([2, 3], I64)])
    run_node("ConstantOfShape", [np.array([4], I64)], value=helper.make_tensor("v", TensorProto.INT64, [1], [7]))
    run_node("ConstantOfShape", [np.array([0, 2], I64)], value=numpy_helper.from_array(np.ones(1, np.float16)))


@pytest.mark.parametrize("start, limit, delta", [(0, 10, 3), (10, 0, -2), (5, 5, 1), (3, 1, 1)])
def test_range(start, limit, delta):
    run_node("Range", [np.array(start, I64), np.array(limit, I64), np.array(delta, I64)])
    run_node("Range", [np.array(start, np.float32), np.array(limit, np.float32), np.array(delta * 0.7, np.float32)])


def test_nonzero_cumsum_onehot():
    run_node("NonZero", [np.array([[1, 0, 3], [0, 5, 0]], np.float32)])
    x = rand(3, 4)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            run_node("CumSum", [x, np.array(1, I64)], exclusive=exclusive, reverse=reverse)
    run_node("OneHot", [np.array([0, 2, -1], I64), np.array(3, I64), np.array([0.0, 1.0], np.float32)])
    run_node("OneHot", [np.array([[0, 2]], I64), np.array(4, I64), np.array([2, 5], I64)], axis=0)
