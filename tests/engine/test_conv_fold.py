"""Conv → BatchNormalization / per-channel Mul and Add chains fold into one ConvAffine step, with the
same results as onnxruntime; chains that must not fold stay as they are."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from frame.engine import load_model
from tests.engine import builders


def _w(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def _model(tail, extra_inits=(), conv="Conv", outputs=("y",), bias=True):
    rng = np.random.default_rng(0)
    m = 6
    w_shape = (m, 4, 3, 3) if conv == "Conv" else (4, m, 3, 3)
    inits = [_w("w", rng.standard_normal(w_shape)), _w("gamma", rng.uniform(0.5, 2, m)),
             _w("beta", rng.standard_normal(m)), _w("mean", rng.standard_normal(m)), _w("var", rng.uniform(0.1, 2, m)),
             _w("scale", rng.standard_normal((1, m, 1, 1))), _w("shift", rng.standard_normal((m, 1, 1))),
             _w("b", rng.standard_normal(m)), *extra_inits]
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [helper.make_node(conv, inputs, ["c"], pads=[1, 1, 1, 1], strides=[2, 2]), *tail]
    proto = builders.model(nodes, [builders.value("x", [1, 4, "h", "w"])],
                           [builders.value(o, None) for o in outputs], inits)
    return proto, {"x": rng.standard_normal((1, 4, 9, 8)).astype(np.float32)}


BN = helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], epsilon=1e-3)
CHAIN = [BN, helper.make_node("Mul", ["scale", "n"], ["s"]), helper.make_node("Add", ["s", "shift"], ["y"])]


@pytest.mark.parametrize("conv, bias", [("Conv", True), ("Conv", False), ("ConvTranspose", True)])
@pytest.mark.parametrize("external", [False, True])
def test_chain_folds_and_matches_onnxruntime(tmp_path, conv, bias, external):
    proto, feeds = _model(CHAIN, conv=conv, bias=bias)
    path = builders.save(proto, tmp_path / "m.onnx", external=external)
    with load_model(path) as model:
        assert model.rewrites["conv_affine"] == 1
        assert [s.node.op_type for s in model.steps] == ["ConvAffine"]
        assert {r.name for r in model.streamed_weights} >= ({"w", "gamma", "var"} if external else set())
        got = model.run(feeds)["y"]
    want = builders.ort_run(path, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_output_scaling_path_when_the_weight_is_the_bigger_pass(tmp_path, monkeypatch):
    from frame.engine.passes import conv_affine as conv_fold

    proto, feeds = _model(CHAIN)
    path = builders.save(proto, tmp_path / "m.onnx")
    calls = []
    original = conv_fold.conv
    monkeypatch.setattr(conv_fold, "conv", lambda *a, **k: calls.append(a[1]) or original(*a, **k))
    with load_model(path) as model:
        got = model.run({"x": feeds["x"][:, :, :2, :2].copy()})["y"]  # tiny image: scale the output
    stored = numpy_helper.to_array(proto.graph.initializer[0])
    assert len(calls) == 1 and np.array_equal(calls[0], stored)  # the weight as stored, not scaled
    np.testing.assert_allclose(got, builders.ort_run(path, {"x": feeds["x"][:, :, :2, :2].copy()})["y"],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tail, outputs, folded", [
    ([BN, helper.make_node("Relu", ["c"], ["y2"]), helper.make_node("Add", ["n", "y2"], ["y"])], ("y",), 0),
    ([helper.make_node("Mul", ["c", "full"], ["y"])], ("y",), 0),  # not per channel
    ([helper.make_node("Add", ["c", "c"], ["y"])], ("y",), 0),
    ([BN, helper.make_node("Mul", ["n", "scale"], ["y"])], ("y", "n"), 1),  # n is a graph output: chain ends there
])
def test_chains_that_must_not_fold(tmp_path, tail, outputs, folded):
    full = _w("full", np.ones((1, 6, 5, 4)))
    proto, feeds = _model(tail, [full], outputs=outputs)
    path = builders.save(proto, tmp_path / "m.onnx")
    with load_model(path) as model:
        fused = model.rewrites["conv_affine"]
        got = model.run(feeds)
    want = builders.ort_run(path, feeds)
    for name in outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4)
    assert fused == folded
