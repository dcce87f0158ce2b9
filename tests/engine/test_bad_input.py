"""Bad feeds and bad weight data fail with errors naming the input or the tensor."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper

from frame.engine import load_model
from frame.engine.errors import InputError, ModelFormatError, NodeError, WeightDataError
from tests.engine import builders


@pytest.fixture
def two_inputs(tmp_path):
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    inputs = [builders.value("a", ["batch", 4]), builders.value("b", ["batch", 4])]
    path = builders.save(builders.model(nodes, inputs, [builders.value("y", ["batch", 4])]), tmp_path / "m.onnx")
    with load_model(path) as model:
        yield model


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


def test_good_feeds_run(two_inputs):
    out = two_inputs.run({"a": _ones(3, 4), "b": _ones(3, 4)})
    assert np.array_equal(out["y"], np.full((3, 4), 2, np.float32))


@pytest.mark.parametrize("feeds,pattern", [
    ({"a": _ones(1, 4)}, r"missing input\(s\): b"),
    ({"a": _ones(1, 4), "b": _ones(1, 4), "c": _ones(1)}, r"unexpected input\(s\): c"),
    ({"a": _ones(1, 4, dtype=np.float64), "b": _ones(1, 4)}, r"'a': dtype float64, expected float32"),
    ({"a": _ones(1, 5), "b": _ones(1, 4)}, r"'a': shape \[1, 5\], expected \[batch, 4\]"),
    ({"a": _ones(4), "b": _ones(1, 4)}, r"'a': shape \[4\] has rank 1"),
    ({"a": [[1.0] * 4], "b": _ones(1, 4)}, r"'a': expected a numpy array"),
])
def test_bad_feeds_are_named(two_inputs, feeds, pattern):
    with pytest.raises(InputError, match=pattern):
        two_inputs.run(feeds)


def test_shared_symbolic_name_is_checked_only_by_the_model_itself(two_inputs, tmp_path):
    """As in onnxruntime, "batch" on two inputs is no constraint of its own; the Add that needs the
    two to agree fails, and its error points at the disagreeing named dim."""
    with pytest.raises(NodeError, match=r"(?s)Add.*'batch' is 2 in input 'a' \(axis 0\) but 3 in input 'b'"):
        two_inputs.run({"a": _ones(2, 4), "b": _ones(3, 4)})
    nodes = [helper.make_node("ReduceSum", ["a"], ["ra"], keepdims=0),
             helper.make_node("ReduceSum", ["b"], ["rb"], keepdims=0),
             helper.make_node("Add", ["ra", "rb"], ["y"])]
    inputs = [builders.value("a", ["n", 4]), builders.value("b", ["n", 4])]
    path = builders.save(builders.model(nodes, inputs, [builders.value("y", [])]), tmp_path / "free.onnx")
    with load_model(path) as model:  # nothing in this model needs the two "n" to agree
        assert model.run({"a": _ones(2, 4), "b": _ones(5, 4)})["y"] == 28


@pytest.mark.parametrize("dim", ["?", "", "-1", "48", "p2o.DynamicDimension.0"])
def test_placeholder_dims_never_constrain(tmp_path, dim):
    """A PaddlePaddle export names every free axis "?": a 48x192 image is [-1, 3, "?", "?"]."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)
    x.type.tensor_type.shape.dim.add().dim_value = -1
    x.type.tensor_type.shape.dim.add().dim_value = 3
    for _ in range(2):
        x.type.tensor_type.shape.dim.add().dim_param = dim
    path = builders.save(builders.model(nodes, [x], [builders.value("y", None)]), tmp_path / "m.onnx")
    with load_model(path) as model:
        assert model.run({"x": _ones(2, 3, 48, 192)})["y"].shape == (2, 3, 48, 192)
        with pytest.raises(InputError, match=r"axis 1 must be 3"):
            model.run({"x": _ones(1, 4, 48, 192)})


def _external_mlp(tmp_path):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    return path, path + "_data", feeds


def test_truncated_external_file_names_tensor_at_load(tmp_path):
    path, data, _ = _external_mlp(tmp_path)
    os.truncate(data, os.path.getsize(data) - 10)
    with pytest.raises(WeightDataError, match=r"weight 'b2'.*truncated"):
        load_model(path)


def test_file_truncated_after_load_names_tensor_at_run(tmp_path):
    path, data, feeds = _external_mlp(tmp_path)
    with load_model(path, weights="nocache") as model:
        os.truncate(data, 100)
        with pytest.raises(WeightDataError, match=r"weight 'w1'"):
            model.run(feeds)


def test_missing_external_file_names_tensor(tmp_path):
    path, data, _ = _external_mlp(tmp_path)
    os.remove(data)
    with pytest.raises(WeightDataError, match=r"weight 'w1'.*cannot read"):
        load_model(path)


def test_wrong_declared_length_names_tensor(tmp_path):
    path, _, _ = _external_mlp(tmp_path)
    proto = onnx.load(path, load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "length":
            entry.value = str(int(entry.value) - 4)
    onnx.save(proto, path)
    with pytest.raises(WeightDataError, match=r"weight 'w1': \d+ bytes of data for shape \(32, 64\)"):
        load_model(path)


def test_embedded_raw_data_of_wrong_length_names_tensor(tmp_path):
    proto, _ = builders.mlp()
    tensor = proto.graph.initializer[1]
    tensor.raw_data = tensor.raw_data[:-4]
    path = builders.save(proto, tmp_path / "m.onnx")
    with pytest.raises(WeightDataError, match=r"weight 'b1'"):
        load_model(path)


def test_external_location_outside_model_folder_is_refused(tmp_path):
    path, _, _ = _external_mlp(tmp_path)
    proto = onnx.load(path, load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../../etc/passwd"
    onnx.save(proto, path)
    with pytest.raises(ModelFormatError, match="outside the model folder"):
        load_model(path)


def test_missing_model_file(tmp_path):
    with pytest.raises(ModelFormatError, match="cannot open"):
        load_model(tmp_path / "nope.onnx")
