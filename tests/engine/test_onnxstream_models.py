"""OnnxStream model folders through the engine, against onnxruntime on the ONNX model they came from.

Folders are written by ``tools/onnxstream_convert.py`` (OnnxStream's published format) from a small
graph with the constructs the format treats specially: conv weights (nchw/nhwc files), a Gemm with
``transB`` (stored transposed), int64 shape arithmetic with a ``Mul`` constant (stored as float32),
``Constant`` nodes (folded into weights), Split sizes, Resize scales, InstanceNormalization, and a
dynamic batch dimension.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.engine import load_model
from frame.engine.errors import ModelFormatError, WeightDataError
from frame.engine.onnxstream import OnnxStreamSource
from frame.engine.onnxstream.summary import read_ops, weight_files

ort = pytest.importorskip("onnxruntime")
TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


convert_tool = load_tool("onnxstream_convert")


def _const(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name + "_value"))


def small_model() -> onnx.ModelProto:
    rng = np.random.RandomState(0)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in [
        ("conv.weight", rng.randn(4, 3, 3, 3) * 0.3), ("conv.bias", rng.randn(4)),
        ("norm.scale", 1 + 0.1 * rng.randn(4)), ("norm.bias", 0.1 * rng.randn(4)),
        ("fc.weight", rng.randn(16, 256) * 0.1), ("fc.bias", rng.randn(16)),
        ("proj", rng.randn(8, 5)), ("resize.scales", np.array([1, 1, 2, 2]))]]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("InstanceNormalization", ["c", "norm.scale", "norm.bias"], ["n"], name="/norm", epsilon=1e-5),
        helper.make_node("Sigmoid", ["n"], ["s"], name="/act/Sigmoid"),
        helper.make_node("Mul", ["n", "s"], ["m"], name="/act/Mul"),
        helper.make_node("Resize", ["m", "", "resize.scales"], ["r"], name="/up/Resize", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Shape", ["r"], ["shape"], name="/Shape"),
        _const("zero", np.array(0, np.int64)),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="/Gather", axis=0),
        _const("heads", np.array(4, np.int64)),
        helper.make_node("Mul", ["batch", "heads"], ["rows"], name="/rows/Mul"),
        _const("axes", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["rows", "axes"], ["rows1"], name="/Unsqueeze"),
        _const("width", np.array([256], np.int64)),
        helper.make_node("Concat", ["rows1", "width"], ["target"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"], name="/Reshape"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["g"], name="/fc/Gemm", transB=1),
        _const("sizes", np.array([8, 8], np.int64)),
        helper.make_node("Split", ["g", "sizes"], ["a", "b"], name="/Split", axis=1),
        helper.make_node("Add", ["a", "b"], ["sum"], name="/Add"),
        helper.make_node("MatMul", ["sum", "proj"], ["y"], name="/proj/MatMul"),
        # integer arithmetic must stay integer although onnx2txt stores Mul's int64 factor as float32
        _const("three", np.array(3, np.int64)), _const("two", np.array(2, np.int64)),
        helper.make_node("Mul", ["batch", "three"], ["b3"], name="/count/Mul"),
        helper.make_node("Div", ["b3", "two"], ["half"], name="/count/Div"),
        helper.make_node("Cast", ["half"], ["count"], name="/count/Cast", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("count", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return small_model()


def reference(model: onnx.ModelProto, x: np.ndarray, output: str = "y") -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([output], {"x": x})[0]


def _x(batch: int = 2) -> np.ndarray:
    return np.random.RandomState(batch).randn(batch, 3, 8, 8).astype(np.float32)


@pytest.mark.parametrize("conv", ["both", "nhwc", "nchw"])
def test_any_conv_weight_layout_gives_the_onnx_result(model, tmp_path, conv):
    folder = convert_tool.convert(model, tmp_path / "m", "fp32", conv)
    names = {p.name for p in folder.iterdir()}
    assert ("conv_2E_weight_nhwc.bin" in names) == (conv != "nchw")
    assert ("conv_2E_weight_nchw.bin" in names) == (conv != "nhwc")
    assert "fc_2E_weight_transposed.bin" in names  # Gemm transB: stored transposed, flag dropped
    with load_model(folder) as m:
        assert [i.name for i in m.inputs] == ["x"] and m.inputs[0].shape == (None, 3, 8, 8)
        for batch in (1, 3):  # dynamic batch, int64 shape arithmetic with the float32-stored factor
            out = m.run({"x": _x(batch)})
            np.testing.assert_allclose(out["y"], reference(model, _x(batch)), rtol=1e-5, atol=1e-5)
            assert out["count"] == reference(model, _x(batch), "count") == (3 * batch) // 2


@pytest.mark.parametrize(("precision", "tolerance"), [("fp16", 5e-3), ("qu8", 0.06)])
def test_fp16_and_uint8_folders_equal_onnx_within_tolerance(model, tmp_path, precision, tolerance):
    folder = convert_tool.convert(model, tmp_path / precision, precision, "nhwc")
    expected = reference(model, _x())
    with load_model(folder, weights="nocache") as m:
        got = m.run({"x": _x()})["y"]
        dtypes = {ref.name: ref.dtype for ref in m.streamed_weights}
    error = np.abs(got - expected).max() / np.abs(expected).max()
    print(f"{precision}: max error {error:.4f} of the output's range")
    assert error < tolerance
    if precision == "qu8":  # weights stream as one byte per value; conv biases and norm stay float32
        assert dtypes["conv.weight:uint8"] == np.uint8 and dtypes["fc.weight_transposed:uint8"] == np.uint8
        assert dtypes["conv.bias"] == np.float32 and dtypes["norm.scale"] == np.float32
        assert error > 1e-4  # really quantised


def test_the_engine_model_matches_the_files_a_folder_needs(model, tmp_path):
    folder = convert_tool.convert(model, tmp_path / "m", "fp32", "both")
    ops = read_ops(str(folder))
    on_disk = {p.name for p in folder.glob("*.bin")}
    assert set(weight_files(ops, conv="nhwc")) | set(weight_files(ops, conv="nchw")) == on_disk


def test_missing_and_truncated_weight_files_are_named(model, tmp_path):
    folder = convert_tool.convert(model, tmp_path / "m", "fp32", "nhwc")
    (folder / "conv_2E_weight_nhwc.bin").unlink()
    (folder / "proj.bin").unlink()
    with pytest.raises(WeightDataError, match=r"2 weight file\(s\) missing .*conv_2E_weight_nchw.bin \(or its "
                                              r"_nhwc.bin\), proj.bin"):
        load_model(folder)
    folder = convert_tool.convert(model, tmp_path / "t", "fp32", "nhwc")
    data = (folder / "fc_2E_bias.bin").read_bytes()
    (folder / "fc_2E_bias.bin").write_bytes(data[:-4])
    with pytest.raises(WeightDataError, match=r"'fc.bias': .*fc_2E_bias.bin has 60 bytes, model.txt declares "
                                              r"float32\[16\] = 64 bytes"):
        load_model(folder / "model.txt")


def test_extra_outputs_and_renames(model, tmp_path):
    folder = convert_tool.convert(model, tmp_path / "m", "fp32")
    source = OnnxStreamSource(str(folder), rename=(("x", "pixels"), ("y", "logits")), extra_outputs=("sum",))
    with load_model(source) as m:
        assert [i.name for i in m.inputs] == ["pixels"]
        out = m.run({"pixels": _x()})
    assert set(out) == {"logits", "count", "sum"} and out["sum"].shape == (8, 8)
    with pytest.raises(ModelFormatError, match="requested output.*nothing_like_this"):
        load_model(OnnxStreamSource(str(folder), extra_outputs=("nothing_like_this",)))


def test_range_data_quantises_calibrated_outputs(model, tmp_path):
    """W8A8: an op listed in range_data.txt hands on its output on a 256-level grid of its range."""
    folder = convert_tool.convert(model, tmp_path / "m", "fp32")
    (folder / "range_data.txt").write_text("/proj/MatMul,-2.0,3.0\n")
    with load_model(folder) as m:
        y = m.run({"x": _x()})["y"]
        ops = m.op_counts
    with load_model(OnnxStreamSource(str(folder), range_data=False)) as m:
        plain = m.run({"x": _x()})["y"]
    scale = np.float32(5.0 / 255)
    assert ops["QuantizeLinear"] == 1 and ops["DequantizeLinear"] == 1
    np.testing.assert_allclose(y, (np.clip(np.rint(plain / scale) + 102, 0, 255) - 102) * scale, atol=1e-5)


def test_http_folder_streams_bin_files_with_range_requests(model, http_root):
    root, server = http_root
    convert_tool.convert(model, root / "m", "fp16", "nhwc")  # what OnnxStream's downloader leaves
    with load_model(root / "m") as local:
        expected = local.run({"x": _x()})["y"]
    with load_model(server.url("m/")) as remote:
        np.testing.assert_array_equal(remote.run({"x": _x()})["y"], expected)
    paths = {path for path, _ in server.requests}
    assert "/m/conv_2E_weight_nhwc.bin" in paths and "/m/conv_2E_weight_nchw.bin" in paths  # probed once, 404
    ranged = [path for path, header in server.requests if path.endswith(".bin") and header]
    assert "/m/fc_2E_weight_transposed.bin" in ranged
    with load_model(server.url("m/model.txt")) as again:
        np.testing.assert_array_equal(again.run({"x": _x()})["y"], expected)


def test_cli_engine_info_and_run_take_a_folder(model, tmp_path):
    folder = convert_tool.convert(model, tmp_path / "m", "qu8", "nhwc")
    info = subprocess.run([sys.executable, "-m", "frame", "engine", "info", str(folder)], capture_output=True,
                          text=True, check=True).stdout
    assert "x: float32 [?, 3, 8, 8]" in info and "uint8" in info and "unsupported: none" in info
    np.save(tmp_path / "x.npy", _x())
    subprocess.run([sys.executable, "-m", "frame", "engine", "run", str(folder / "model.txt"), "--feed",
                    f"x={tmp_path / 'x.npy'}", "--out", str(tmp_path / "out.npz")], check=True, capture_output=True)
    with load_model(folder) as m:
        np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], m.run({"x": _x()})["y"])


@pytest.mark.parametrize("escape", ["absolute", "relative"])
def test_a_weight_file_symlinked_out_of_the_folder_is_refused(model, tmp_path, escape):
    """A ``.bin`` that is a symlink to a file outside the model folder is not read (as ``frame
    serve-model`` refuses it): a model folder from elsewhere must not make the frame read other files."""
    folder = convert_tool.convert(model, tmp_path / "m", "fp32", "nhwc")
    outside = tmp_path / "secret.bin"
    bias = folder / "fc_2E_bias.bin"
    outside.write_bytes(bias.read_bytes())  # same size: only the location is wrong
    bias.unlink()
    bias.symlink_to(outside if escape == "absolute" else Path("..") / "secret.bin")
    with pytest.raises(WeightDataError, match=r"fc_2E_bias.bin is a link to .*outside the model folder"):
        load_model(folder)


def test_a_weight_file_symlinked_inside_the_folder_still_loads(model, tmp_path):
    folder = convert_tool.convert(model, tmp_path / "m", "fp32", "nhwc")
    (folder / "shared").mkdir()
    (folder / "fc_2E_bias.bin").rename(folder / "shared" / "fc_2E_bias.bin")
    (folder / "fc_2E_bias.bin").symlink_to(Path("shared") / "fc_2E_bias.bin")
    with load_model(folder) as m:
        np.testing.assert_allclose(m.run({"x": _x()})["y"], reference(model, _x()), rtol=1e-5, atol=1e-5)
