"""A narrowing 1x1 conv that is the last reader of its input runs right after that input's previous
reader (frame/engine/passes/hoist_narrowing.py): same results, the big input dies earlier; widening convs stay."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from frame.engine import load_model
from tests.engine import builders

RNG = np.random.default_rng(3)


def resnet(tmp_path, c_in=8, c_out=4, hw=(16, 16)):
    """x = relu(input) → conv1 (3x3) → relu → conv2 (3x3) → + shortcut(x) (1x1 conv c_in → c_out).

    (A graph input would not do: the caller's feed stays alive whatever the engine frees.)"""
    inits = [numpy_helper.from_array((RNG.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in
             (("w1", (c_out, c_in, 3, 3)), ("w2", (c_out, c_out, 3, 3)), ("ws", (c_out, c_in, 1, 1)), ("bs", (c_out,)))]
    nodes = [helper.make_node("Relu", ["input"], ["x"], name="first"),
             helper.make_node("Conv", ["x", "w1"], ["h1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu"),
             helper.make_node("Conv", ["a1", "w2"], ["h2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Conv", ["x", "ws", "bs"], ["s"], name="shortcut"),
             helper.make_node("Add", ["s", "h2"], ["y"], name="add")]
    proto = builders.model(nodes, [builders.value("input", [1, c_in, *hw])], [builders.value("y", None)], inits)
    feeds = {"input": RNG.standard_normal((1, c_in, *hw)).astype(np.float32)}
    return builders.save(proto, tmp_path / "m.onnx"), feeds


def test_narrowing_shortcut_runs_after_the_first_conv_and_frees_its_input(tmp_path):
    path, feeds = resnet(tmp_path)
    with load_model(path) as model:
        assert [s.node.name for s in model.steps] == ["first", "conv1", "shortcut", "relu", "conv2", "add"]
        assert "x" in next(s for s in model.steps if s.node.name == "shortcut").free
        got = model.run(feeds)["y"]
        assert model.rewrites["hoist_narrowing"] == 1
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-6


def test_widening_shortcut_stays_where_it_is(tmp_path):
    path, feeds = resnet(tmp_path, c_in=4, c_out=8)
    with load_model(path) as model:
        assert [s.node.name for s in model.steps] == ["first", "conv1", "relu", "conv2", "shortcut", "add"]
        assert model.rewrites["hoist_narrowing"] == 0
        got = model.run(feeds)["y"]
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-6
