"""The load-time pass list: one ordered table, whose counts are the model's ``rewrites``."""

from __future__ import annotations

import inspect
import logging

from onnx import helper

from frame.engine import load_model
from frame.engine.passes.order import PASSES
from tests.engine import builders


def test_pass_names_are_unique_and_every_pass_takes_nodes_and_context() -> None:
    names = [p.name for p in PASSES]
    assert len(names) == len(set(names))
    for p in PASSES:
        assert len(inspect.signature(p.run).parameters) == 2, p.name
        assert p.why.strip(), p.name
    # the orders other tests and the pass docstrings rely on
    for before, after in [("attention", "silu"), ("silu", "norm_conv"), ("conv_affine", "weight_decoding"),
                          ("weight_decoding", "geglu"), ("geglu", "gelu"), ("dead_nodes", "hoist_narrowing")]:
        assert names.index(before) < names.index(after), (before, after)
    assert [p.name for p in PASSES if not p.counted] == ["dead_nodes", "commute"]


def test_a_load_reports_every_counted_pass_in_rewrites_and_the_log(tmp_path, caplog) -> None:
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    proto = builders.model(nodes, [builders.value("x", [2, 8])], [builders.value("y", [2, 8])])
    path = builders.save(proto, tmp_path / "m.onnx")
    with caplog.at_level(logging.INFO, logger="frame.engine.model"), load_model(path) as model:
        assert list(model.rewrites) == [p.name for p in PASSES if p.counted] + ["row_streamed"]
        assert model.rewrites["silu"] == 1 and model.rewrites["attention"] == 0
    assert "rewrites silu 1" in caplog.text

