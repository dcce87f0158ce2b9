"""If/Loop/Scan bodies in the runtime: their weights are streamed like any other (scanner, provider
order, held across loop iterations), values they read from outside stay alive, and load-time
validation descends into them and reports every problem."""

from __future__ import annotations

import argparse

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.cli.engine import info_command
from frame.engine import load_model
from frame.engine.errors import NodeError, UnsupportedModelError
from frame.engine.io.protobuf_index import scan_model
from frame.engine.io.sources import LocalSource
from frame.engine.providers import NoCache
from tests.engine import builders

F, B, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64


def _weight(value, name="w"):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _branch(op: str, name: str, weight: np.ndarray, source: str = "h") -> onnx.GraphProto:
    return helper.make_graph([helper.make_node(op, [source, "w"], [f"{name}_out"], name=f"{name}_op")], name, [],
                             [builders.value(f"{name}_out", [2, 3])], [_weight(weight)])


def _if_model(then_op="Add", else_op="Mul") -> onnx.ModelProto:
    """x → Relu → h; If(c): then h + w_then, else h * w_else (both initializers named "w")."""
    then_branch = _branch(then_op, "then", np.arange(6).reshape(2, 3))
    else_branch = _branch(else_op, "else", np.full((2, 3), -2.0))
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then_branch, else_branch=else_branch)]
    return builders.model(nodes, [builders.value("x", [2, 3]), builders.value("c", [], B)],
                          [builders.value("y", [2, 3])])


class Recording(NoCache):
    def __init__(self) -> None:
        super().__init__()
        self.gets: list[tuple[str, int]] = []
        self.released: list[tuple[str, int]] = []

    def get(self, ref):
        self.gets.append((ref.name, ref.index))
        return super().get(ref)

    def release(self, ref):
        self.released.append((ref.name, ref.index))


def test_scanner_strips_body_initializers_and_numbers_graphs_in_preorder(tmp_path):
    path = builders.save(_if_model(), tmp_path / "if.onnx")
    scanned = scan_model(LocalSource(path), chunk=64)
    assert scanned.embedded == {}
    assert sorted(scanned.subgraph_embedded) == [1, 2] and all("w" in r for r in scanned.subgraph_embedded.values())
    structure = onnx.ModelProto.FromString(scanned.structure)
    for attr in structure.graph.node[1].attribute:
        assert attr.g.initializer[0].raw_data == b""  # the bytes stay in the file, streamed on demand
    data = open(path, "rb").read()
    then_number = 1 + [a.name for a in structure.graph.node[1].attribute].index("then_branch")  # file order
    then_range = scanned.subgraph_embedded[then_number]["w"]
    assert np.frombuffer(data[then_range.offset:then_range.offset + then_range.length], np.float32).tolist() == \
        list(range(6))


@pytest.mark.parametrize("external", [False, True])
def test_branch_weights_are_streamed_only_when_the_branch_runs(tmp_path, external):
    path = builders.save(_if_model(), tmp_path / "if.onnx", external=external)
    provider = Recording()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    with load_model(path, weights=provider) as model:
        assert [ref.name for ref in model.streamed_weights] == ["w", "w"]
        assert [ref.index for ref in model.streamed_weights] == [0, 1]
        (step,) = [s for s in model.steps if s.node.op_type == "If"]
        then_index = step.node.attrs["then_branch"].weights["w"].index
        else_index = step.node.attrs["else_branch"].weights["w"].index
        y = model.run({"x": x, "c": np.array(True)})["y"]
        np.testing.assert_allclose(y, np.maximum(x, 0) + np.arange(6).reshape(2, 3))
        assert provider.gets == [("w", then_index)] and provider.released == [("w", then_index)]
        y = model.run({"x": x, "c": np.array(False)})["y"]
        np.testing.assert_allclose(y, np.maximum(x, 0) * -2)
        assert provider.gets == [("w", then_index), ("w", else_index)] == provider.released
    with load_model(path, weights="ram") as model:  # same name in both branches: cached apart
        assert not np.allclose(model.run({"x": x, "c": np.array(True)})["y"],
                               model.run({"x": x, "c": np.array(False)})["y"])


def test_loop_body_weights_are_fetched_once_per_run(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "w"], ["m"]), helper.make_node("Add", ["m", "h"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [builders.value("i", [], I64), builders.value("cond_in", [], B), builders.value("acc_in", [3])],
        [builders.value("cond_out", [], B), builders.value("acc_out", [3])], [_weight([0.5, 1.0, 2.0])])
    nodes = [helper.make_node("Neg", ["x"], ["h"]),
             helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)]
    proto = builders.model(nodes, [builders.value("x", [3]), builders.value("n", [], I64)], [builders.value("y", [3])])
    path = builders.save(proto, tmp_path / "loop.onnx")
    provider = Recording()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    with load_model(path, weights=provider) as model:
        y = model.run({"x": x, "n": np.array(4, np.int64)})["y"]
    want = x.copy()
    for _ in range(4):
        want = want * np.array([0.5, 1.0, 2.0], np.float32) - x
    np.testing.assert_allclose(y, want)
    assert provider.gets == [("w", 0)] and provider.released == [("w", 0)]


def test_values_read_only_inside_a_body_stay_alive(tmp_path):
    """``h`` has no consumer in the main graph: without the If's implicit input it would be dead code,
    or freed right after Relu."""
    path = builders.save(_if_model(), tmp_path / "if.onnx")
    with load_model(path) as model:
        (if_step,) = [s for s in model.steps if s.node.op_type == "If"]
        assert "h" in if_step.node.inputs and "h" in if_step.free
        relu = next(s for s in model.steps if s.node.op_type == "Relu")
        assert "h" not in relu.free


def _unsupported_inside_bodies() -> onnx.ModelProto:
    inner_else = helper.make_graph([helper.make_node("Bogus", ["h"], ["ie"], name="deep_bogus")], "ie", [],
                                   [builders.value("ie", [2, 3])])
    inner_then = _branch("Add", "it", np.ones((2, 3)))
    then_branch = helper.make_graph(
        [helper.make_node("If", ["c"], ["t0"], name="inner_if", then_branch=inner_then, else_branch=inner_else),
         helper.make_node("FancyOp", ["t0"], ["t1"], name="then_fancy")], "then", [], [builders.value("t1", [2, 3])])
    else_branch = _branch("Mul", "else", np.ones((2, 3)))
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("If", ["c"], ["y0"], name="outer_if", then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Relu", ["y0"], ["y"], name="tail", bogus_attr=1)]
    return builders.model(nodes, [builders.value("x", [2, 3]), builders.value("c", [], B)],
                          [builders.value("y", [2, 3])])


def test_validation_descends_into_nested_bodies(tmp_path):
    path = builders.save(_unsupported_inside_bodies(), tmp_path / "m.onnx")
    with pytest.raises(UnsupportedModelError) as info:
        load_model(path)
    problems = info.value.problems
    assert len(problems) == 3
    deep = next(p for p in problems if "deep_bogus" in p)
    assert "'outer_if' (If) then_branch" in deep and "'inner_if' (If) else_branch" in deep and "Bogus" in deep
    assert any("then_fancy" in p and "'outer_if' (If) then_branch" in p for p in problems)
    assert any("tail" in p and "bogus_attr" in p for p in problems)


def test_many_problems_summarised_in_the_error_and_all_listed_by_engine_info(tmp_path, capsys):
    body_nodes = [helper.make_node(f"Unknown{i}", ["h"], [f"u{i}"], name=f"u{i}") for i in range(25)]
    body_nodes.append(helper.make_node("Sum", [f"u{i}" for i in range(25)], ["s"]))
    body = helper.make_graph(body_nodes, "then", [], [builders.value("s", [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("If", ["c"], ["y"], name="big_if", then_branch=body, else_branch=body)]
    inputs = [builders.value("x", [2, 3]), builders.value("c", [], B)]
    proto = builders.model(nodes, inputs, [builders.value("y", [2, 3])])
    path = builders.save(proto, tmp_path / "m.onnx")
    with pytest.raises(UnsupportedModelError) as info:
        load_model(path)
    assert len(info.value.problems) == 50
    assert "and 30 more" in str(info.value) and "frame engine info" in str(info.value)
    info_command(argparse.Namespace(source=path))
    listed = [line for line in capsys.readouterr().out.splitlines() if "Unknown" in line and "big_if" in line]
    assert len(listed) == 50


def test_sequence_bodies_refused_at_load(tmp_path):
    seq_out = helper.make_tensor_sequence_value_info("s", F, [2])
    body = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["s"])], "b", [], [seq_out])
    nodes = [helper.make_node("If", ["c"], ["y"], name="seq_if", then_branch=body, else_branch=body)]
    proto = builders.model(nodes, [builders.value("x", [2]), builders.value("c", [], B)], [builders.value("y", None)])
    path = builders.save(proto, tmp_path / "m.onnx")
    with pytest.raises(UnsupportedModelError, match="sequence"):
        load_model(path)


def test_failure_inside_a_body_names_where(tmp_path):
    path = builders.save(_if_model(then_op="MatMul"), tmp_path / "if.onnx")  # (2,3) @ (2,3) cannot work
    with load_model(path) as model, pytest.raises(NodeError, match=r"'choose' \(If\) then_branch.*then_op"):
        model.run({"x": np.ones((2, 3), np.float32), "c": np.array(True)})
