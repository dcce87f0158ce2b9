"""Binary arithmetic, comparisons and logic against onnxruntime (broadcasting, dtypes, in-place)."""

import numpy as np
import pytest

from frame.engine.ops import resolve
from tests.engine.ops.node_check import rand, run_node


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 2, 1, 5)), ((), (3,))])
def test_arithmetic_broadcasts_like_onnxruntime(op, shapes):
    a = rand(*shapes[0], seed=1)
    b = rand(*shapes[1], seed=2, low=0.5, high=2.0)
    run_node(op, [a, b])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_arithmetic_float16_and_int64(op):
    run_node(op, [rand(2, 5, dtype=np.float16, seed=3), rand(5, dtype=np.float16, seed=4, low=0.5)], rtol=1e-3)
    a = np.array([[7, -7, 9, -9], [0, 5, -5, 100]], dtype=np.int64)
    run_node(op, [a, np.array([2, 2, -4, -4], dtype=np.int64)])


def test_integer_division_truncates_toward_zero():
    a = np.array([-7, 7, -1, 5], dtype=np.int32)
    b = np.array([2, -2, 3, 5], dtype=np.int32)
    (out,) = run_node("Div", [a, b])
    assert out.tolist() == [-3, -3, 0, 1]


@pytest.mark.parametrize("exponent", [np.array(2.0, np.float32), np.array(0.5, np.float32),
                                      np.array(3, np.int64), rand(4, seed=9, low=-1, high=2)])
def test_pow_scalar_and_tensor_exponents(exponent):
    run_node("Pow", [rand(3, 4, seed=5, low=0.1, high=3.0), exponent], rtol=1e-5)


def test_pow_integer_base():
    run_node("Pow", [np.array([1, 2, 3, -4], np.int64), np.array([3, 2, 1, 2], np.int64)])


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(fmod):
    a = np.array([-7, 7, -8, 9, 4], dtype=np.int64)
    b = np.array([3, -3, 3, 4, -2], dtype=np.int64)
    run_node("Mod", [a, b], fmod=fmod)
    if fmod:
        run_node("Mod", [rand(6, seed=1, low=-5, high=5), np.array(1.5, np.float32)], fmod=1)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op):
    run_node(op, [rand(2, 3, seed=1), rand(3, seed=2), rand(1, 3, seed=3)])
    run_node(op, [rand(4, seed=1)])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons(op):
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    run_node(op, [a, np.array([2, 5, 6], np.int64)])
    run_node(op, [rand(2, 3, seed=1), np.array(0.0, np.float32)])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    a = np.array([[True, False], [True, True]])
    run_node(op, [a, np.array([False, True])])


def test_where_broadcasts_three_ways():
    cond = rand(3, 1, 4, seed=1) > 0
    run_node("Where", [cond, rand(2, 1, seed=2), np.array(-1.0, np.float32)])
    run_node("Where", [cond, np.zeros((4,), np.int64), np.ones((3, 2, 1), np.int64)])


def test_prelu_broadcasts_slope():
    run_node("PRelu", [rand(2, 3, 4, seed=1), rand(3, 1, seed=2)], opset=16)


def test_reuse_writes_into_input_zero_only_when_shape_and_dtype_match():
    add = resolve("Add", 17).fn
    a = rand(2, 3)
    out = add(a, rand(3, seed=1), _reuse=True)
    assert out is a
    small = rand(3)
    out = add(small, rand(2, 3, seed=1), _reuse=True)
    assert out is not small and out.shape == (2, 3)
    readonly = rand(2, 3)
    readonly.flags.writeable = False
    assert add(readonly, rand(2, 3), _reuse=True) is not readonly
    a16 = rand(2, 3, dtype=np.float16)
    out = add(a16, rand(2, 3), _reuse=True)
    assert out is not a16 and out.dtype == np.float32


def test_scalar_inputs_give_arrays():
    out = resolve("Mul", 17).fn(np.array(2.0, np.float32), np.array(3.0, np.float32))
    assert isinstance(out, np.ndarray) and out.shape == () and out == 6.0
