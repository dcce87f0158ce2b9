"""``frame.engine.io.graph_inputs`` reads the same graph inputs as ``onnx`` does, without importing
numpy or onnx (the settings checks' child reads the UNet's ``sample`` shape with it, issue 27)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from frame.engine.errors import ModelFormatError
from frame.engine.io.graph_inputs import read_graph_inputs

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "frame/models/demo").glob("*/model.onnx")) + sorted(
    (ROOT / "tests/fixtures/real_models").glob("*.onnx"))


def _onnx_inputs(path: Path) -> dict:
    model = onnx.load(str(path), load_external_data=False)

    def dim(d):
        return d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None

    return {i.name: tuple(dim(d) for d in i.type.tensor_type.shape.dim)
            if i.type.tensor_type.HasField("shape") else None for i in model.graph.input}


@pytest.mark.parametrize("path", MODELS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_inputs_are_onnx_s(path):
    assert read_graph_inputs(path) == _onnx_inputs(path)


def test_fixed_negative_named_and_unknown_axes_and_embedded_weights(tmp_path):
    import numpy as np

    inputs = [helper.make_tensor_value_info("sample", TensorProto.FLOAT, [2, 4, 64, 96]),
              helper.make_tensor_value_info("t", TensorProto.FLOAT, [-1, "steps", None]),
              helper.make_tensor_value_info("scalar", TensorProto.FLOAT, None)]
    weight = helper.make_tensor("w", TensorProto.FLOAT, [256, 256], np.ones((256, 256), np.float32).tobytes(), raw=True)
    graph = helper.make_graph([helper.make_node("Identity", ["sample"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert read_graph_inputs(path) == {"sample": (2, 4, 64, 96), "t": (-1, "steps", None), "scalar": None}


def test_not_an_onnx_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff" * 20)
    with pytest.raises(ModelFormatError, match="bad.onnx"):
        read_graph_inputs(bad)
    truncated = tmp_path / "t.onnx"
    truncated.write_bytes(MODELS[0].read_bytes()[:200])
    with pytest.raises(ModelFormatError, match="t.onnx"):
        read_graph_inputs(truncated)


def test_reading_imports_neither_numpy_nor_onnx():
    code = ("import sys; from frame.engine.io.graph_inputs import read_graph_inputs; "
            f"read_graph_inputs({str(MODELS[0])!r}); print(sorted({{'numpy', 'onnx'}} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
