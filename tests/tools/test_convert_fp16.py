"""tools/convert_fp16.py: Optimum-style fp16 weight storage (needs only numpy + onnx)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

TOOL = Path(__file__).resolve().parents[2] / "tools" / "convert_fp16.py"
ENGINE_FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engine"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("convert_fp16", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _model(huge: bool = False) -> onnx.ModelProto:
    """x @ W + b, times a scalar, Relu. W (8 KiB as fp16) is over the external-data threshold;
    ``huge`` puts a value beyond float16's range into it."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    if huge:
        w[0, 0] = 1e6
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(0.5, np.float32), "scale")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Mul", ["a", "scale"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model_or_path, x):
    ort = pytest.importorskip("onnxruntime")
    data = model_or_path.SerializeToString() if isinstance(model_or_path, onnx.ModelProto) else str(model_or_path)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_weights_become_fp16_feeding_casts_and_results_stay_close(tool):
    model = _model()
    report = tool.Conversion()
    out = tool.to_fp16_weights(model, report=report)
    onnx.checker.check_model(out)
    inits = {t.name: t for t in out.graph.initializer}
    assert inits["W_fp16"].data_type == TensorProto.FLOAT16 and inits["b_fp16"].data_type == TensorProto.FLOAT16
    assert inits["scale"].data_type == TensorProto.FLOAT  # scalars stay float32
    assert "W" not in inits and "b" not in inits
    casts = {n.input[0]: n for n in out.graph.node if n.op_type == "Cast"}
    assert casts["W_fp16"].output == ["W"] and casts["W_fp16"].attribute[0].i == TensorProto.FLOAT
    assert sorted(report.converted) == ["W", "b"] and report.bytes_after * 2 == report.bytes_before
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    ref, got = _run(model, x), _run(out, x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2)
    assert not np.array_equal(got, ref)  # really rounded


def test_out_of_range_and_keep_pattern_stay_float32(tool):
    report = tool.Conversion()
    out = tool.to_fp16_weights(_model(huge=True), keep=re.compile("^b$"), report=report)
    types = {t.name: t.data_type for t in out.graph.initializer}
    assert types == {"W": TensorProto.FLOAT, "b": TensorProto.FLOAT, "scale": TensorProto.FLOAT}
    assert report.kept_range == ["W"] and report.kept_pattern == ["b"] and report.converted == []


def test_cli_writes_external_data_and_refuses_nothing_to_do(tool, tmp_path):
    src = tmp_path / "in.onnx"
    onnx.save(_model(), str(src))
    dst = tmp_path / "out" / "model.onnx"
    assert tool.main([str(src), str(dst), "--external"]) == 0
    assert (tmp_path / "out" / "model.onnx_data").is_file()
    x = np.ones((2, 64), np.float32)
    np.testing.assert_allclose(_run(dst, x), _run(_model(), x), rtol=1e-2, atol=1e-2)
    with pytest.raises(SystemExit, match="no float32 initializer"):
        tool.main([str(dst), str(tmp_path / "again.onnx")])
    with pytest.raises(SystemExit, match="must differ"):
        tool.main([str(src), str(src)])


def test_matches_the_committed_fp16_weight_fixture(tool, tmp_path):
    """The engine fixture made by the builder has exactly the layout this tool produces."""
    fixture = onnx.load(str(ENGINE_FIXTURES / "vae_decoder_ts17_static_fp16w" / "model.onnx"))
    halves = [t.name for t in fixture.graph.initializer if t.data_type == TensorProto.FLOAT16]
    casts = {n.input[0]: n.output[0] for n in fixture.graph.node if n.op_type == "Cast"}
    assert halves and all(casts[h] + "_fp16" == h for h in halves)
