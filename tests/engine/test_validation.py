"""Load-time validation: every node that cannot run is reported at once, before any compute."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from frame.engine import load_model
from frame.engine.errors import UnsupportedModelError
from frame.errors import FrameError
from tests.engine import builders


def _model(tmp_path, nodes, opset=17):
    x, y = builders.value("x", [2, 3]), builders.value("y", None)
    path = builders.save(builders.model(nodes, [x], [y], opset=opset), tmp_path / "m.onnx")
    return path


class NeverCalled:
    def prepare(self, refs):
        pass

    def get(self, ref):
        raise AssertionError("weights fetched for a model that cannot run")

    def release(self, ref):
        pass


def test_unknown_op_names_node_op_and_opset(tmp_path):
    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["a"], name="ok"),
                             helper.make_node("FancyOp", ["a"], ["y"], name="fancy_1")])
    with pytest.raises(UnsupportedModelError) as info:
        load_model(path, weights=NeverCalled())
    assert isinstance(info.value, FrameError)
    message = str(info.value)
    assert "fancy_1" in message and "FancyOp" in message and "opset 17" in message


def test_all_problems_reported_at_once(tmp_path):
    nodes = [helper.make_node("FancyOp", ["x"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2", bogus_attr=3),
             helper.make_node("Foo", ["b"], ["y"], name="n3", domain="com.example")]
    path = _model(tmp_path, nodes)
    with pytest.raises(UnsupportedModelError) as info:
        load_model(path)
    problems = info.value.problems
    assert len(problems) == 3
    assert "n1" in problems[0] and "n2" in problems[1] and "bogus_attr" in problems[1]
    assert "n3" in problems[2] and "com.example" in problems[2]


def test_validation_happens_before_any_weight_is_read(tmp_path):
    w = np.ones((3, 3), np.float32)
    x = builders.value("x", [2, 3])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]), helper.make_node("FancyOp", ["a"], ["y"])]
    proto = builders.model(nodes, [x], [builders.value("y", None)],
                           [helper.make_tensor("w", 1, [3, 3], w.tobytes(), raw=True)])
    path = builders.save(proto, tmp_path / "m.onnx")
    with pytest.raises(UnsupportedModelError, match="FancyOp"):
        load_model(path, weights=NeverCalled())


def test_op_newer_than_model_opset(tmp_path):
    path = _model(tmp_path, [helper.make_node("Gelu", ["x"], ["y"], name="g")], opset=17)  # Gelu is opset 20
    with pytest.raises(UnsupportedModelError, match=r"'g'.*Gelu.*opset 17"):
        load_model(path)
