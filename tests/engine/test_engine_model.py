"""The public Model surface: inputs/outputs, progress callback, URL/path handling."""

from __future__ import annotations

import numpy as np

from frame.engine import load_model
from tests.engine import builders


def test_inputs_and_outputs_describe_the_graph(tmp_path):
    proto, _ = builders.mlp()
    with load_model(builders.save(proto, tmp_path / "m.onnx")) as model:
        assert [(i.name, i.dtype, i.shape) for i in model.inputs] == [("x", np.dtype(np.float32), ("batch", 32))]
        assert [(o.name, o.shape) for o in model.outputs] == [("y", ("batch", 16))]
        assert model.weight_bytes == (32 * 64 + 64 + 64 * 16 + 16) * 4 + 4 * 8
        assert model.op_counts["MatMul"] == 2


def test_progress_reports_every_node_up_to_one(tmp_path):
    proto, feeds = builders.mlp()
    with load_model(builders.save(proto, tmp_path / "m.onnx")) as model:
        seen: list[float] = []
        model.run(feeds, progress=seen.append)
    assert len(seen) == len(model.steps) == len(proto.graph.node)
    assert seen == sorted(seen) and seen[-1] == 1.0 and seen[0] > 0


def test_unused_nodes_are_not_run(tmp_path):
    proto, feeds = builders.mlp()
    from onnx import helper

    proto.graph.node.append(helper.make_node("Relu", ["h2"], ["dangling"], name="dead"))
    with load_model(builders.save(proto, tmp_path / "m.onnx")) as model:
        assert "dead" not in [s.node.name for s in model.steps]
        expected = builders.ort_run(str(tmp_path / "m.onnx"), feeds)["y"]
        assert builders.rel_l2(model.run(feeds)["y"], expected) < 1e-6


def test_importing_the_engine_and_its_commands_is_cheap():
    import subprocess
    import sys

    code = ("import sys, frame.engine, frame.cli.engine; "
            "print(sorted(m for m in ('numpy', 'onnx', 'requests') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
