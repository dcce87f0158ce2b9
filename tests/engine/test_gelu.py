"""Fused exact GELU / GEGLU (frame.engine.passes.gelu) and operand commuting for in-place Add/Mul."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper, numpy_helper

from frame.engine import load_model
from frame.engine.passes.gelu import gelu
from tests.engine import builders


def _constant(name: str, value: float):
    """A Constant node, as TorchScript exports the scalars (the fusion matches inline constants only)."""
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.float32)))


def geglu_model(variant: str, keep_erf: bool = False):
    """proj (MatMul + Add(bias, ·)) → halves → hidden · gelu(gate), as TorchScript exports diffusers' GEGLU.

    ``variant``: "div" (x / √2, then · 0.5 last), "mul" (x · 1/√2, · 0.5 before · x) or "plain" (gelu
    only, no GEGLU product). ``keep_erf`` also makes the Erf output a graph output (no fusion allowed).
    """
    rng = np.random.default_rng(0)
    d = 24
    inits = [numpy_helper.from_array(rng.standard_normal((16, 2 * d)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(2 * d).astype(np.float32), "bias"),
             numpy_helper.from_array(np.array([0], np.int64), "start"),
             numpy_helper.from_array(np.array([d], np.int64), "mid"),
             numpy_helper.from_array(np.array([2 * d], np.int64), "end"),
             numpy_helper.from_array(np.array([-1], np.int64), "axis")]
    nodes = [_constant("sqrt2", math.sqrt(2)), _constant("rsqrt2", 1 / math.sqrt(2)), _constant("one", 1.0),
             _constant("half", 0.5),
             helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["bias", "mm"], ["proj"]),
             helper.make_node("Slice", ["proj", "start", "mid", "axis"], ["hidden"]),
             helper.make_node("Slice", ["proj", "mid", "end", "axis"], ["gate"])]
    if variant == "mul":
        nodes += [helper.make_node("Mul", ["gate", "rsqrt2"], ["scaled"]),
                  helper.make_node("Erf", ["scaled"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["e1"]),
                  helper.make_node("Mul", ["e1", "half"], ["e2"]),
                  helper.make_node("Mul", ["gate", "e2"], ["g"])]
    else:
        nodes += [helper.make_node("Div", ["gate", "sqrt2"], ["scaled"]),
                  helper.make_node("Erf", ["scaled"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["e1"]),
                  helper.make_node("Mul", ["gate", "e1"], ["e2"]),
                  helper.make_node("Mul", ["e2", "half"], ["g"])]
    outputs = [builders.value("y", None)]
    if variant == "plain":
        nodes.append(helper.make_node("Identity", ["g"], ["y"]))
    else:
        nodes.append(helper.make_node("Mul", ["hidden", "g"], ["y"]))
    if keep_erf:
        outputs.append(builders.value("e", None))
    proto = builders.model(nodes, [builders.value("x", [2, 5, 16])], outputs, inits)
    return proto, {"x": rng.standard_normal((2, 5, 16)).astype(np.float32) * 2}


@pytest.mark.parametrize("variant, fused_op", [("div", "GeluMul"), ("mul", "GeluMul"), ("plain", "Gelu")])
def test_gelu_chains_fuse_and_match_onnxruntime(tmp_path, variant, fused_op):
    proto, feeds = geglu_model(variant)
    path = builders.save(proto, tmp_path / "geglu.onnx")
    with load_model(path) as model:
        ops = [s.node.op_type for s in model.steps]
        assert model.rewrites["gelu"] == 1 and fused_op in ops and "Erf" not in ops
        got = model.run(feeds)["y"]
    want = builders.ort_run(path, feeds)["y"]
    assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max()


def test_no_fusion_when_an_intermediate_is_used_elsewhere(tmp_path):
    proto, feeds = geglu_model("div", keep_erf=True)
    path = builders.save(proto, tmp_path / "geglu.onnx")
    with load_model(path) as model:
        assert model.rewrites["gelu"] == 0
        got = model.run(feeds)
    want = builders.ort_run(path, feeds)
    for name in ("y", "e"):
        assert builders.rel_l2(got[name], want[name]) < 1e-6


@pytest.mark.parametrize("split", [False, True])
def test_gelu_kernel_blocks_match_float64(request, split):
    if split:
        request.getfixturevalue("two_way_splits")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 1024)).astype(np.float32) * 3  # 1.2 MB of rows per input: several blocks
    hidden = rng.standard_normal(x.shape).astype(np.float32)
    x64 = x.astype(np.float64)
    from math import erf as erf64
    want = 0.5 * x64 * (1 + np.vectorize(erf64)(x64 / math.sqrt(2)))
    # atol: 1 + erf(x) cancels for x << 0 in float32 (as in the unfused graph)
    np.testing.assert_allclose(gelu(x), want, rtol=1e-5, atol=3e-6)
    np.testing.assert_allclose(gelu(x, hidden), want * hidden, rtol=1e-5, atol=3e-6)
    assert gelu(np.zeros((0, 4), np.float32)).shape == (0, 4)
    half = gelu(x.astype(np.float16))
    assert half.dtype == np.float16


def test_bias_add_written_as_add_bias_x_runs_in_place(tmp_path):
    """Add(bias, mm) reuses mm's buffer after commuting; the result is unchanged."""
    proto, feeds = geglu_model("plain")
    path = builders.save(proto, tmp_path / "geglu.onnx")
    addresses = {}
    with load_model(path) as model:
        add = next(s for s in model.steps if s.node.op_type == "Add")
        assert add.node.inputs == ["mm", "bias"] and add.reuse
        names = [s.node.op_type for s in model.steps]

        def record(i, env):
            if names[i] in ("MatMul", "Add"):
                addresses[names[i]] = env[model.steps[i].node.outputs[0]].__array_interface__["data"][0]
        model._executor.after_step = record
        got = model.run(feeds)["y"]
    assert addresses["MatMul"] == addresses["Add"]
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-6
