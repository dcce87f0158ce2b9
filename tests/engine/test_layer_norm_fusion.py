"""LayerNorm exported before opset 17 (ReduceMean … Div, Mul γ, Add β) fuses into one node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from frame.engine import load_model
from tests.engine import builders


def decomposed_layer_norm(axes=(-1,), affine: str = "both", weight_first: bool = False, keep_mean=False):
    """x → LayerNorm as torch.onnx writes it at opset 14, plus a Relu so x is not a graph input's alias."""
    rng = np.random.default_rng(0)
    d = 12
    inits = [numpy_helper.from_array(rng.standard_normal(d).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(d).astype(np.float32), "beta")]
    const = [helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
             helper.make_node("Constant", [], ["eps"], value=numpy_helper.from_array(np.array(1e-5, np.float32)))]
    nodes = const + [
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("ReduceMean", ["h"], ["mean"], axes=list(axes)),
        helper.make_node("Sub", ["h", "mean"], ["centred"]),
        helper.make_node("Pow", ["centred", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=list(axes)),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Div", ["centred", "std"], ["normed"])]
    last = "normed"
    if affine in ("scale", "both"):
        nodes.append(helper.make_node("Mul", ["gamma", last] if weight_first else [last, "gamma"], ["scaled"]))
        last = "scaled"
    if affine == "both":
        nodes.append(helper.make_node("Add", ["beta", last] if weight_first else [last, "beta"], ["shifted"]))
        last = "shifted"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    outputs = [builders.value("y", None)] + ([builders.value("mean", None)] if keep_mean else [])
    proto = builders.model(nodes, [builders.value("x", [2, 7, d])], outputs, inits, opset=14)
    return proto, {"x": rng.standard_normal((2, 7, d)).astype(np.float32) * 3 + 1}


@pytest.mark.parametrize("affine, weight_first", [("both", False), ("both", True), ("scale", False), ("none", False)])
def test_decomposed_layer_norm_fuses_and_matches_onnxruntime(tmp_path, affine, weight_first):
    proto, feeds = decomposed_layer_norm(affine=affine, weight_first=weight_first)
    path = builders.save(proto, tmp_path / "ln.onnx")
    with load_model(path) as model:
        ops = [s.node.op_type for s in model.steps]
        assert model.rewrites["layer_norm"] == 1
        assert not {"ReduceMean", "Pow", "Sqrt", "Div"} & set(ops)
        assert ops.count("Mul") == 0 and ops.count("Add") == 0  # γ and β inside the fused node (when present)
        got = model.run(feeds)["y"]
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-6


@pytest.mark.parametrize("variant", ["axes", "used_elsewhere"])
def test_other_reductions_are_left_alone(tmp_path, variant):
    proto, feeds = decomposed_layer_norm(axes=(1,) if variant == "axes" else (-1,),
                                         keep_mean=variant == "used_elsewhere")
    path = builders.save(proto, tmp_path / "ln.onnx")
    with load_model(path) as model:
        assert model.rewrites["layer_norm"] == 0
        got = model.run(feeds)
    want = builders.ort_run(path, feeds)
    for name in want:
        assert builders.rel_l2(got[name], want[name]) < 1e-6
