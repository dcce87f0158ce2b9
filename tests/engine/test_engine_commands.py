"""`frame engine run` and `frame engine info` through their argparse registration."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from onnx import helper

from frame.engine import commands
from frame.errors import UsageError
from tests.engine import builders


def _parse(argv):
    parser = argparse.ArgumentParser(prog="frame")
    commands.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_run_writes_outputs(tmp_path, capsys):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    np.save(tmp_path / "x.npy", feeds["x"])
    out = tmp_path / "out.npz"
    args = _parse(["engine", "run", path, "--feed", f"x={tmp_path / 'x.npy'}", "--out", str(out),
                   "--weights", "nocache", "--attention-slices", "2"])
    assert args.func(args) == 0
    with np.load(out) as data:
        assert builders.rel_l2(data["y"], builders.ort_run(path, feeds)["y"]) < 1e-6
    assert "y: float32[3, 16]" in capsys.readouterr().out


@pytest.mark.parametrize("feed,pattern", [("x", "NAME=FILE.npy"), ("x=/nonexistent.npy", "cannot read")])
def test_run_bad_feed_is_usage_error(tmp_path, feed, pattern):
    proto, _ = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx")
    args = _parse(["engine", "run", path, "--feed", feed, "--out", str(tmp_path / "o.npz")])
    with pytest.raises(UsageError, match=pattern):
        args.func(args)


def test_info_lists_io_ops_weights_and_every_unsupported_op(tmp_path, capsys):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
             helper.make_node("FancyOp", ["a"], ["b"], name="f1"),
             helper.make_node("OtherOp", ["b"], ["y"], name="f2")]
    w = helper.make_tensor("w", 1, [4, 4], np.ones((4, 4), np.float32).tobytes(), raw=True)
    proto = builders.model(nodes, [builders.value("x", ["batch", 4])], [builders.value("y", None)], [w])
    path = builders.save(proto, tmp_path / "m.onnx")
    args = _parse(["engine", "info", path])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "x: float32 [batch, 4]" in text
    assert "weights: 1 tensors, 64 bytes" in text
    assert "MatMul: 1" in text and "FancyOp: 1" in text
    assert "unsupported: 2 node(s)" in text and "'f1'" in text and "'f2'" in text
