"""``frame model convert``: layouts, onnxruntime round trips, streaming reads, errors, atomic output."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.cli.program import main
from frame.convert import files, storage
from frame.convert.files import Options, convert
from frame.convert.policy import Policy
from frame.engine import load_model
from tests.engine.builders import save, value

ort = pytest.importorskip("onnxruntime")
PIPELINES = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines"


def _linear_model(huge: bool = False) -> onnx.ModelProto:
    """x @ W + b, times a scalar, Relu (the old tools/convert_fp16.py test model)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    if huge:
        w[0, 0] = 1e6
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(0.5, np.float32), "scale")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Mul", ["a", "scale"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "g", [value("x", [2, 64])], [value("y", [2, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _every_weight_op() -> onnx.ModelProto:
    """Gather (embedding) → MatMul → Gemm(transB) → Reshape → Conv → ConvTranspose, with biases and an
    io conv (4 output channels) at the end."""
    rng = np.random.default_rng(1)

    def init(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [init("table", 50, 48), init("w_mm", 48, 40), init("w_gemm", 64, 40), init("b_gemm", 64),
             init("w_conv", 24, 16, 3, 3), init("b_conv", 24), init("w_convt", 24, 8, 2, 2), init("w_out", 4, 8, 3, 3),
             numpy_helper.from_array(np.array([1, 16, 2, 2], np.int64), "shape")]
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("MatMul", ["emb", "w_mm"], ["h"]),
        helper.make_node("Gemm", ["h", "w_gemm", "b_gemm"], ["g"], transB=1),
        helper.make_node("Reshape", ["g", "shape"], ["img"]),
        helper.make_node("Conv", ["img", "w_conv", "b_conv"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["c", "w_convt"], ["u"], strides=[2, 2]),
        helper.make_node("Conv", ["u", "w_out"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(nodes, "g", [value("ids", [1], TensorProto.INT64)], [value("y", [1, 4, 4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ort(path, feeds, optimized: bool = False) -> np.ndarray:
    options = ort.SessionOptions()
    if not optimized:  # onnxruntime's optimizer turns DequantizeLinear→MatMul into int8 activations
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _frame(path, feeds) -> np.ndarray:
    with load_model(str(path)) as model:
        return next(iter(model.run(feeds).values()))


def _rel(a, b) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def _inits(path) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in onnx.load(str(path), load_external_data=False).graph.initializer}


def test_fp16_layout_matches_optimum_and_runs_in_both_runtimes(tmp_path):
    src = save(_linear_model(), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    report = convert(src, dst, Options("fp16"))["in.onnx"]
    inits = _inits(dst)
    assert inits["W_fp16"].data_type == TensorProto.FLOAT16 and inits["b_fp16"].data_type == TensorProto.FLOAT16
    assert inits["scale"].data_type == TensorProto.FLOAT  # scalars stay float32
    assert "W" not in inits and (tmp_path / "out.onnx_data").is_file()
    casts = {n.input[0]: n for n in onnx.load(str(dst), load_external_data=False).graph.node if n.op_type == "Cast"}
    assert casts["W_fp16"].output == ["W"] and casts["W_fp16"].attribute[0].i == TensorProto.FLOAT
    assert sorted(report.converted) == ["W", "b"]
    x = {"x": np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)}
    ref, got = _ort(src, x), _ort(dst, x)
    assert got.dtype == np.float32 and not np.array_equal(got, ref)  # really rounded
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(_frame(dst, x), got, rtol=1e-5, atol=1e-5)


def test_fp16_keeps_out_of_range_tensors_and_keep_pattern_float32(tmp_path):
    src = save(_linear_model(huge=True), tmp_path / "in.onnx")
    report = convert(src, tmp_path / "out.onnx", Options("fp16", policy=Policy(keep=re.compile("^b$"))))["in.onnx"]
    types = {n: t.data_type for n, t in _inits(tmp_path / "out.onnx").items()}
    assert types == {"W": TensorProto.FLOAT, "b": TensorProto.FLOAT, "scale": TensorProto.FLOAT}
    assert report.kept["W"] == "values beyond float16's range" and report.converted == {}
    x = {"x": np.ones((2, 64), np.float32)}
    np.testing.assert_array_equal(_ort(tmp_path / "out.onnx", x), _ort(src, x))


def test_uint8_quantizes_weight_operands_per_output_channel(tmp_path):
    src = save(_every_weight_op(), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    report = convert(src, dst, Options("uint8"))["in.onnx"]
    proto = onnx.load(str(dst), load_external_data=False)
    dq = {n.output[0]: n for n in proto.graph.node if n.op_type == "DequantizeLinear"}
    axes = {name: next(a.i for a in node.attribute if a.name == "axis") for name, node in dq.items()}
    assert axes == {"w_mm": 1, "w_gemm": 0, "w_conv": 0, "w_convt": 1}
    inits = _inits(dst)
    assert inits["w_mm_quantized"].data_type == TensorProto.UINT8 and list(inits["w_mm_scale"].dims) == [40]
    assert list(inits["w_convt_scale"].dims) == [8] and list(inits["w_gemm_scale"].dims) == [64]
    assert inits["table_fp16"].data_type == TensorProto.FLOAT16  # lookup tables: float16
    assert inits["b_conv"].data_type == TensorProto.FLOAT and inits["w_out"].data_type == TensorProto.FLOAT
    assert report.kept == {"w_out": "first/last conv"}
    feeds = {"ids": np.array([7], np.int64)}
    reference = _ort(src, feeds)
    quantized = _ort(dst, feeds)
    assert 1e-4 < _rel(quantized, reference) < 2e-2
    np.testing.assert_allclose(_frame(dst, feeds), quantized, rtol=1e-4, atol=1e-5)
    assert _ort(dst, feeds, optimized=True).shape == reference.shape


def test_uint8_of_an_fp16_weight_export_reads_through_its_casts(tmp_path):
    fp16 = tmp_path / "fp16.onnx"
    convert(save(_every_weight_op(), tmp_path / "in.onnx"), fp16, Options("fp16"))
    dst = tmp_path / "u8.onnx"
    report = convert(fp16, dst, Options("uint8"))["fp16.onnx"]
    assert {"w_mm_fp16", "w_conv_fp16", "w_gemm_fp16"} <= {n for n, kind in report.converted.items() if kind == "uint8"}
    feeds = {"ids": np.array([3], np.int64)}
    assert _rel(_ort(dst, feeds), _ort(tmp_path / "in.onnx", feeds)) < 2e-2
    np.testing.assert_allclose(_frame(dst, feeds), _ort(dst, feeds), rtol=1e-4, atol=1e-5)


def test_uint8_refuses_an_opset_without_per_channel_dequantize(tmp_path, capsys):
    model = _linear_model()
    model.opset_import[0].version = 12
    src = save(model, tmp_path / "in.onnx")
    assert main(["model", "convert", src, str(tmp_path / "out.onnx"), "--weights", "uint8"]) == 2
    err = capsys.readouterr().err
    assert "opset 12" in err and "--weights fp16" in err and not (tmp_path / "out.onnx").exists()


def test_folder_conversion_copies_small_files_and_both_runtimes_run_every_component(tmp_path):
    src = PIPELINES / "sd15" / "model"
    dst = tmp_path / "sd15-uint8"
    assert main(["model", "convert", str(src), str(dst), "--weights", "uint8"]) == 0
    copied = sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
    expected = sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file() and p.name != "model.onnx_data")
    components = ("text_encoder", "unet", "vae_decoder", "vae_encoder")
    assert sorted(set(copied) - {f"{c}/model.onnx_data" for c in components}) == expected
    assert (dst / "tokenizer" / "vocab.json").read_bytes() == (src / "tokenizer" / "vocab.json").read_bytes()
    assert not list(tmp_path.glob(".*"))  # no temporary left beside DST
    rng = np.random.default_rng(0)
    feeds = {"sample": rng.standard_normal((1, 4, 8, 8)).astype(np.float32), "timestep": np.array([500.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((1, 77, 32)).astype(np.float32)}
    got = _ort(dst / "unet" / "model.onnx", feeds)
    assert _rel(got, _ort(src / "unet" / "model.onnx", feeds)) < 0.05
    np.testing.assert_allclose(_frame(dst / "unet" / "model.onnx", feeds), got, rtol=1e-3, atol=1e-4)
    ids = {"input_ids": np.arange(77, dtype=np.int32)[None]}
    np.testing.assert_allclose(_frame(dst / "text_encoder" / "model.onnx", ids),
                               _ort(dst / "text_encoder" / "model.onnx", ids), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("content", [b"", b"hello, I am a text file\n", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4])
def test_a_file_that_is_not_onnx_exits_2_with_one_line(tmp_path, capsys, content):
    src = tmp_path / "model.onnx"
    src.write_bytes(content)
    assert main(["model", "convert", str(src), str(tmp_path / "out.onnx"), "--weights", "fp16"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a usable ONNX model" in err and str(src) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_a_truncated_model_exits_2_naming_it(tmp_path, capsys):
    whole = Path(save(_linear_model(), tmp_path / "whole.onnx")).read_bytes()
    (tmp_path / "cut.onnx").write_bytes(whole[:len(whole) // 2])
    assert main(["model", "convert", str(tmp_path / "cut.onnx"), str(tmp_path / "out.onnx"), "--weights", "uint8"]) == 2
    assert "cut.onnx is not a usable ONNX model" in capsys.readouterr().err


def test_an_existing_destination_is_never_touched(tmp_path, capsys):
    src = save(_linear_model(), tmp_path / "in.onnx")
    (tmp_path / "out.onnx").write_bytes(b"precious")
    assert main(["model", "convert", src, str(tmp_path / "out.onnx"), "--weights", "fp16"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "out.onnx").read_bytes() == b"precious"


@pytest.mark.parametrize("folder", [False, True])
def test_an_interrupted_conversion_leaves_nothing_behind(tmp_path, monkeypatch, folder):
    """Ctrl-C (KeyboardInterrupt) in the middle of the weights: no DST, no temporaries."""
    calls = []

    def interrupting_chunks(self, ref, chunk_bytes=None):
        calls.append(ref.name)
        if len(calls) == 5:
            raise KeyboardInterrupt
        yield from original(self, ref, chunk_bytes)

    original = storage.TensorReader.chunks
    monkeypatch.setattr(storage.TensorReader, "chunks", interrupting_chunks)
    if folder:
        src, dst = PIPELINES / "sd15" / "model", tmp_path / "out"
    else:
        src, dst = save(_every_weight_op(), tmp_path / "src" / "in.onnx"), tmp_path / "out.onnx"
    assert main(["model", "convert", str(src), str(dst), "--weights", "fp16"]) == 130
    assert len(calls) == 5
    assert [p.name for p in tmp_path.iterdir() if p.name != "src"] == []


def test_weights_are_read_in_bounded_chunks(tmp_path, monkeypatch):
    """Streaming: no read asks for more than one chunk of a tensor stored row-major (fp16 and axis-0 uint8)."""
    monkeypatch.setattr(storage, "CHUNK_BYTES", 2048)
    sizes = []
    original = storage.TensorReader._read

    def recording_read(self, ref, offset, length):
        sizes.append((ref.name, length))
        return original(self, ref, offset, length)

    monkeypatch.setattr(storage.TensorReader, "_read", recording_read)
    src = save(_every_weight_op(), tmp_path / "in.onnx", external=True)
    for mode in ("fp16", "uint8"):
        sizes.clear()
        convert(src, tmp_path / f"{mode}.onnx", Options(mode))
        by_name = dict(sizes)
        assert by_name["table"] <= 2048 and by_name["w_conv"] <= 2048, by_name  # 9.6 kB and 13.8 kB tensors
        assert len([n for n, _ in sizes if n == "table"]) > 1


def test_progress_bar_reports_bytes(tmp_path, capsys):
    src = save(_every_weight_op(), tmp_path / "in.onnx")
    assert main(["model", "convert", src, str(tmp_path / "out.onnx"), "--weights", "uint8"]) == 0
    captured = capsys.readouterr()
    assert "100%" in captured.err and "in.onnx" in captured.err
    assert "in.onnx: 5 weights to uint8" in captured.out
    assert files.MODES == ("fp16", "uint8")
