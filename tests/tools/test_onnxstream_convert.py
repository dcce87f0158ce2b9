"""tools/onnxstream_convert.py and tools/onnxstream_layout.py: OnnxStream's format as published.

The converter must write what OnnxStream's format description says (escaped names, one raw file per
weight, conv weights as _nchw/_nhwc, Gemm weights pre-transposed, Constant nodes folded, fp16 and
per-tensor uint8 percentile quantisation), and the tiny fixture models it converts must give the
ONNX originals' outputs within fp16 / uint8 tolerance when frame runs the folders.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.engine import load_model
from frame.engine.onnxstream import OnnxStreamSource

ort = pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "tests" / "fixtures" / "pipelines"


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


convert_tool = _tool("onnxstream_convert")
layout_tool = _tool("onnxstream_layout")


def test_uint8_quantisation_follows_the_published_scheme():
    values = np.linspace(-1.0, 3.0, 2001, dtype=np.float32)
    stored, kind = convert_tool.quantize(values, "MatMul", 1)
    low, high = values[2], values[-3]  # 0.1 % in from each end: int(n * 0.001) and int(-n * 0.001 - 1)
    scale = (float(high) - float(low)) / 255
    zero = int(abs(float(low)) / scale)
    assert kind == f"uint8[{scale!r},{zero}]" and stored.dtype == np.uint8
    np.testing.assert_array_equal(stored, np.clip(values / scale + zero, 0, 255).astype(np.uint8))  # truncated
    positive, kind = convert_tool.quantize(np.array([1.0, 2.0, 4.0] * 400, np.float32), "Mul", 1)
    assert kind.endswith(",0]")  # a range above 0 is widened down to 0
    assert convert_tool.quantize(np.array([-2.5], np.float32), "Mul", 1)[1] == "uint8[2.5,2]"
    assert convert_tool.quantize(np.array(0.5, np.float32), "Pow", 1)[1] == "uint8[0.5,0]"
    bias = np.ones(4, np.float32)
    for op, position in (("Conv", 2), ("InstanceNormalization", 1), ("InstanceNormalization", 2), ("Resize", 2)):
        assert convert_tool.quantize(bias, op, position)[1] == "float32"


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2), "conv.w")
    g = numpy_helper.from_array(np.ones((5, 8), np.float32), "fc/w")
    nodes = [
        helper.make_node("Conv", ["x", "conv.w"], ["c"], name="/conv", kernel_shape=[2, 2]),
        helper.make_node("Constant", [], ["/shape_output_0"],
                         value=numpy_helper.from_array(np.array([1, 8], np.int64))),
        helper.make_node("Reshape", ["c", "/shape_output_0"], ["flat"], name="/flat"),
        helper.make_node("Gemm", ["flat", "fc/w"], ["y"], name="/fc", transB=1, alpha=1.0),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], [w, g])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_folder_contents_follow_the_format_description(tmp_path):
    folder = convert_tool.convert(_model(), tmp_path / "m", "fp32", "both")
    assert sorted(p.name for p in folder.iterdir()) == [
        "_2F_shape_5F_output_5F_0.bin", "conv_2E_w_nchw.bin", "conv_2E_w_nhwc.bin", "fc_2F_w_transposed.bin",
        "model.txt"]
    lines = (folder / "model.txt").read_text().splitlines()
    assert lines == [
        "/conv:Conv*input:x(1,3,3,3);conv_2E_w_nchw.bin(float32:2,3,2,2)*output:c(1,2,2,2)*kernel_shape:2,2",
        "/flat:Reshape*input:c(1,2,2,2);_2F_shape_5F_output_5F_0.bin(int64:2)*output:flat(1,8)",
        "/fc:Gemm*input:flat(1,8);fc_2F_w_transposed.bin(float32:8,5)*output:y(1,5)*alpha:1.0",
    ]
    w = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    nhwc = np.fromfile(folder / "conv_2E_w_nhwc.bin", np.float32)
    np.testing.assert_array_equal(nhwc, w.transpose(0, 2, 3, 1).ravel())
    np.testing.assert_array_equal(np.fromfile(folder / "conv_2E_w_nchw.bin", np.float32), w.ravel())
    half = convert_tool.convert(_model(), tmp_path / "h", "fp16", "nhwc")
    assert "conv_2E_w_nchw.bin(float16:2,3,2,2)" in (half / "model.txt").read_text()
    assert not (half / "conv_2E_w_nchw.bin").exists() and (half / "conv_2E_w_nhwc.bin").stat().st_size == 48


def _run_onnx(path: Path, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _psnr(got: np.ndarray, expected: np.ndarray) -> float:
    peak = float(np.abs(expected).max())
    return float(10 * np.log10(peak**2 / np.mean((got.astype(np.float64) - expected) ** 2)))


@pytest.fixture(scope="module")
def sd15_folder(tmp_path_factory):
    return layout_tool.write_sd15(PIPELINES / "sd15" / "model", tmp_path_factory.mktemp("os") / "sd15")


def test_tiny_text_encoder_and_unet_equal_onnx_within_fp16(sd15_folder):
    ids = np.array([[3512, *range(40, 115), 3513]], np.int32)
    expected = _run_onnx(PIPELINES / "sd15" / "model" / "text_encoder" / "model.onnx", {"input_ids": ids})[0]
    source = OnnxStreamSource(str(sd15_folder / "text_encoder_fp32"), rename=(("onnx::Reshape_0", "ids"),))
    with load_model(source) as model:
        assert model.inputs[0].dtype == np.int64  # token ids: inferred from the Gather they index
        (got,) = model.run({"ids": ids.astype(np.int64)}).values()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)  # fp32 folder: exact up to op order

    rng = np.random.RandomState(3)
    feeds = {"sample": rng.randn(1, 4, 8, 12).astype(np.float32), "timestep": np.array([421.0], np.float32),
             "encoder_hidden_states": rng.randn(1, 77, 32).astype(np.float32)}
    expected = _run_onnx(PIPELINES / "sd15" / "model" / "unet" / "model.onnx", feeds)[0]
    with load_model(sd15_folder / "unet_fp16") as model:
        got = model.run(feeds)["out_sample"]
    print(f"unet fp16: {_psnr(got, expected):.1f} dB")
    assert _psnr(got, expected) > 60


def test_tiny_vae_fp16_and_w8a8_equal_onnx_within_tolerance(sd15_folder):
    latents = (np.random.RandomState(5).randn(1, 4, 8, 8) * 1.2 / 0.18215).astype(np.float32)
    expected = _run_onnx(PIPELINES / "sd15" / "model" / "vae_decoder" / "model.onnx", {"latent_sample": latents})[0]
    results = {}
    for folder, range_data in (("vae_decoder_fp16", True), ("vae_decoder_qu8", True), ("vae_decoder_qu8", False)):
        with load_model(OnnxStreamSource(str(sd15_folder / folder), range_data=range_data)) as model:
            assert [i.name for i in model.inputs] == ["input.1"]
            results[folder, range_data] = _psnr(model.run({"input.1": latents})["815"], expected)
            if folder == "vae_decoder_qu8" and range_data:
                assert model.op_counts["QuantizeLinear"] > 20  # every calibrated Conv/Add/Mul/... output
    print({k: round(v, 1) for k, v in results.items()})
    assert results["vae_decoder_fp16", True] > 60
    assert results["vae_decoder_qu8", False] > 35  # uint8 weights (W8A32)
    assert results["vae_decoder_qu8", True] > 28  # and uint8 activations at the calibrated ranges (W8A8)
    assert results["vae_decoder_qu8", True] < results["vae_decoder_qu8", False]  # the ranges really apply
