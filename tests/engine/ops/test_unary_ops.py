"""Maths functions, activations and Clip against onnxruntime."""

import math

import numpy as np
import pytest

from frame.engine.ops import UnsupportedOp, bind_node
from frame.engine.ops.unary import erf
from tests.engine.ops.node_check import make_node, rand, run_node

FLOAT_OPS = ["Abs", "Neg", "Exp", "Sin", "Cos", "Tan", "Tanh", "Floor", "Ceil", "Sign", "Round",
             "Sigmoid", "Erf", "Relu", "Atan", "Sinh", "Cosh", "Softplus", "Identity"]


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_unary_float32(op):
    x = rand(3, 17, seed=7, low=-5, high=5)
    x[0, :4] = [0.0, 0.5, -0.5, 2.5]
    run_node(op, [x], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal", "Asin", "Acos"])
def test_unary_positive_domain(op):
    run_node(op, [rand(4, 9, seed=3, low=0.05, high=0.99)])


@pytest.mark.parametrize("op", ["Sigmoid", "Erf", "Abs", "Neg", "Sqrt", "Exp"])
def test_unary_float16_keeps_dtype(op):
    run_node(op, [rand(5, 7, dtype=np.float16, seed=2, low=0.1, high=3)], rtol=2e-3, atol=1e-3)


def test_erf_matches_math_erf_to_float32_precision():
    x = np.linspace(-6, 6, 20001, dtype=np.float32)
    want = np.array([math.erf(float(v)) for v in x])
    np.testing.assert_allclose(erf(x), want, rtol=0, atol=5e-7)


def test_sigmoid_extremes_do_not_overflow():
    (out,) = run_node("Sigmoid", [np.array([-1000.0, -90.0, 0.0, 90.0, 1000.0], np.float32)])
    assert out[0] == 0.0 and out[-1] == 1.0


def test_not_isnan_isinf():
    run_node("Not", [np.array([True, False])])
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    run_node("IsNaN", [x])
    run_node("IsInf", [x])
    run_node("IsInf", [x], detect_negative=0)


@pytest.mark.parametrize("op, attrs", [("LeakyRelu", {"alpha": 0.2}), ("Elu", {"alpha": 0.7}),
                                       ("HardSigmoid", {}), ("Mish", {})])
def test_parametric_activations(op, attrs):
    run_node(op, [rand(4, 6, seed=1, low=-4, high=4)], opset=18, rtol=1e-5, atol=1e-6, **attrs)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate):
    run_node("Gelu", [rand(4, 33, seed=5, low=-6, high=6)], opset=20, atol=2e-6, approximate=approximate)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(UnsupportedOp, match="approximate"):
        bind_node(make_node("Gelu", [True], 1, approximate="fast"), 20)


def test_clip_attribute_and_input_forms():
    x = rand(3, 8, seed=2, low=-3, high=3)
    run_node("Clip", [x], opset=6, min=-1.0, max=0.5)
    run_node("Clip", [x, np.array(-1.0, np.float32), np.array(0.5, np.float32)], opset=13)
    run_node("Clip", [x, None, np.array(0.5, np.float32)], opset=13)
    run_node("Clip", [x, np.array(-0.5, np.float32)], opset=13)
    run_node("Clip", [x], opset=13)
    run_node("Clip", [np.array([-5, 3, 9], np.int64), np.array(0, np.int64), np.array(4, np.int64)], opset=13)


def test_dropout_is_identity_at_inference():
    x = rand(2, 5)
    run_node("Dropout", [x], opset=13)
    run_node("Dropout", [x], opset=13, n_outputs=2)


def test_selu_hard_swish():
    x = rand(3, 9, seed=4, low=-5, high=5)
    run_node("Selu", [x], rtol=1e-5, atol=1e-6)
    run_node("HardSwish", [x], opset=14, rtol=1e-5, atol=1e-6)
