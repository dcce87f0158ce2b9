"""SiLU fusion: Mul(x, Sigmoid(x)) becomes one chunked, in-place node with identical results."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from frame.engine import load_model
from frame.engine.passes.silu import CHUNK, silu
from tests.engine import builders


def test_kernel_matches_definition_including_extremes():
    x = np.concatenate([np.linspace(-100, 100, CHUNK * 2 + 7, dtype=np.float32), [-1e30, 1e30, 0]])
    x = x.astype(np.float32)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))
    got = silu(x.copy())
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-30)
    assert np.isfinite(got).all()


def test_kernel_reuses_only_when_allowed():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    kept = x.copy()
    out = silu(x)
    assert out is not x and np.array_equal(x, kept)
    assert silu(x, _reuse=True) is x
    view = kept.T  # not contiguous: never written in place
    assert silu(view, _reuse=True) is not view


@pytest.mark.parametrize("order", ["x_first", "sigmoid_first"])
def test_fused_in_models_and_matches_onnxruntime(tmp_path, order):
    mul_inputs = ["a", "s"] if order == "x_first" else ["s", "a"]
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["s"]),
             helper.make_node("Mul", mul_inputs, ["y"])]
    proto = builders.model(nodes, [builders.value("x", [2, 70000])], [builders.value("y", [2, 70000])])
    path = builders.save(proto, tmp_path / "m.onnx")
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 70000)).astype(np.float32) * 4}
    with load_model(path) as model:
        assert model.rewrites["silu"] == 1
        assert [s.node.op_type for s in model.steps] == ["Add", "SiLU"]
        assert model.steps[1].reuse  # a dies in the SiLU: computed in place
        got = model.run(feeds)["y"]
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-6


def test_not_fused_when_sigmoid_output_is_used_elsewhere(tmp_path):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"]),
             helper.make_node("Neg", ["s"], ["z"])]
    proto = builders.model(nodes, [builders.value("x", [4])], [builders.value("y", [4]), builders.value("z", [4])])
    path = builders.save(proto, tmp_path / "m.onnx")
    feeds = {"x": np.arange(4, dtype=np.float32)}
    with load_model(path) as model:
        assert model.rewrites["silu"] == 0
        got = model.run(feeds)
    expected = builders.ort_run(path, feeds)
    assert all(builders.rel_l2(got[k], expected[k]) < 1e-6 for k in ("y", "z"))
