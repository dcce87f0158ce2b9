"""frame's engine ``Model`` and serve-render's onnxruntime ``OrtModel`` are both the pipeline's
``Runnable`` (``frame.engine.runnable``): every member the pipeline calls, with the same parameters,
so the pipeline never asks which engine it holds."""

from __future__ import annotations

import inspect

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from frame.engine.model import Model, load_model
from frame.engine.runnable import Runnable
from frame.serve.render.engines import OrtModel, onnxruntime_installed


def _tiny_model(path) -> str:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def _methods() -> list[str]:
    return [name for name, value in vars(Runnable).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property))]


@pytest.mark.parametrize("cls", [Model, OrtModel])
def test_each_engine_defines_every_member_with_the_protocols_parameters(cls):
    """A static check: each method and property of ``Runnable`` is on the class with the same parameter
    names (a missing or renamed one would send the pipeline back to probing)."""
    assert {"run", "run_shared", "fetch_stats", "token_table", "set_readahead", "close"} <= set(_methods())
    for name in _methods():
        ours, theirs = vars(Runnable)[name], getattr(cls, name)
        assert isinstance(theirs, property) == isinstance(ours, property), f"{cls.__name__}.{name}"
        if not isinstance(ours, property):
            expected = list(inspect.signature(ours).parameters)
            assert list(inspect.signature(theirs).parameters) == expected, f"{cls.__name__}.{name}"


def test_frames_model_is_a_runnable(tmp_path):
    model = load_model(_tiny_model(tmp_path / "relu.onnx"))
    try:
        assert isinstance(model, Runnable)
        assert model.shares_weight_reads and model.lora_report is not None
        x = np.array([[-1.0, 0.0, 2.0]], np.float32)
        assert model.run_shared([{"x": x}, {"x": -x}])[1]["y"].tolist() == [[1.0, 0.0, 0.0]]
    finally:
        model.close()


@pytest.mark.skipif(not onnxruntime_installed(), reason="onnxruntime (frame[desktop]) is not installed")
def test_the_onnxruntime_adapter_is_a_runnable_and_answers_plainly(tmp_path):
    """What only frame's streaming engine has is answered, not missing: nothing streamed or counted,
    no read-ahead, no token table, separate runs for run_shared."""
    model = OrtModel(_tiny_model(tmp_path / "relu.onnx"))
    try:
        assert isinstance(model, Runnable)
        assert not model.shares_weight_reads and model.streamed_weights == [] and not model.op_counts
        assert model.lora_report is None and model.fetch_stats is None
        assert model.token_table() is None and model.set_readahead(32 << 20) is False
        x = np.array([[-1.0, 0.0, 2.0]], np.float32)
        outs = model.run_shared([{"x": x}, {"x": -x}])
        assert [o["y"].tolist() for o in outs] == [[[0.0, 0.0, 2.0]], [[1.0, 0.0, 0.0]]]
    finally:
        model.close()
