"""Memory-bound steps of the exported GroupNorm → SiLU chain: the Mul after a Reshape works in place
(when the Reshape's buffer has no other user), SiLU and InstanceNormalization run in row blocks on
the core pool with the same (or more exact) numbers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from frame.engine import load_model
from frame.engine.ops.norm import instance_normalization
from frame.engine.passes.silu import CHUNK, silu
from tests.engine import builders


def group_norm_tail(tmp_path, keep_relu_output: bool):
    """x → Relu → Reshape → Mul(gamma) → Add(beta) → y (plus Relu's output reused later, if asked)."""
    rng = np.random.default_rng(3)
    shape = [1, 4, 8, 8]
    inits = [numpy_helper.from_array(np.array([1, 4, 64], np.int64), "shape3"),
             numpy_helper.from_array(rng.standard_normal((4, 1)).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal((4, 1)).astype(np.float32), "beta")]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape3"], ["v"], name="reshape"),
             helper.make_node("Mul", ["v", "gamma"], ["m"], name="mul"),
             helper.make_node("Add", ["m", "beta"], ["y"], name="add")]
    outputs = [builders.value("y", [1, 4, 64])]
    if keep_relu_output:
        nodes.append(helper.make_node("Neg", ["r"], ["z"], name="neg"))
        outputs.append(builders.value("z", shape))
    proto = builders.model(nodes, [builders.value("x", shape)], outputs, inits)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    return builders.save(proto, tmp_path / "m.onnx"), feeds


@pytest.mark.parametrize("keep_relu_output", [False, True])
def test_mul_after_reshape_writes_in_place_only_when_nobody_else_sees_the_buffer(tmp_path, keep_relu_output):
    path, feeds = group_norm_tail(tmp_path, keep_relu_output)
    addresses: dict[str, int] = {}
    with load_model(path, weights="nocache") as model:
        names = [s.node.name for s in model.steps]

        def record(i, env):
            out = model.steps[i].node.outputs[0]
            addresses[names[i]] = env[out].__array_interface__["data"][0]
        model._executor.after_step = record
        got = model.run(feeds)
    in_place = addresses["mul"] == addresses["relu"]
    assert in_place is not keep_relu_output
    expected = builders.ort_run(path, feeds)
    for name, want in expected.items():
        assert builders.rel_l2(got[name], want) < 1e-6, name


def test_silu_blocks_match_a_single_pass():
    x = np.random.default_rng(5).standard_normal(CHUNK * 70 + 13).astype(np.float32) * 6  # > 4 MB: threaded
    with np.errstate(over="ignore"):
        expected = (x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    got = silu(x.reshape(1, -1))
    np.testing.assert_allclose(got.reshape(-1), expected, rtol=1e-6, atol=1e-30)
    same = x.copy()
    assert silu(same, _reuse=True) is same and np.array_equal(same, got.reshape(-1))


def test_instance_norm_long_rows_are_exact():
    """The VAE's GroupNorm rows (8 MB each, threaded) against a float64 reference."""
    x = np.random.default_rng(6).standard_normal((1, 3, 1 << 21)).astype(np.float32) + 3
    scale = np.array([1, 2, 0.5], np.float32)
    bias = np.array([0, 1, -1], np.float32)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    ref = ref * scale[:, None] + bias[:, None]
    got = instance_normalization(x, scale, bias)
    assert np.abs(got - ref).max() < 1e-4


def test_view_of_a_feed_is_never_overwritten(tmp_path):
    """Reshape of a graph input → Mul: the caller's array must come back unchanged."""
    inits = [numpy_helper.from_array(np.array([2, 8], np.int64), "shape2"),
             numpy_helper.from_array(np.full((1, 8), 3, np.float32), "k")]
    nodes = [helper.make_node("Reshape", ["x", "shape2"], ["v"]), helper.make_node("Mul", ["v", "k"], ["y"])]
    proto = builders.model(nodes, [builders.value("x", [4, 4])], [builders.value("y", [2, 8])], inits)
    path = builders.save(proto, tmp_path / "m.onnx")
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with load_model(path) as model:
        got = model.run({"x": x})["y"]
    assert np.array_equal(x, np.arange(16, dtype=np.float32).reshape(4, 4))
    assert np.array_equal(got, x.reshape(2, 8) * 3)
