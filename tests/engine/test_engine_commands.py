"""`frame engine run` and `frame engine info` through their argparse registration."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from onnx import helper

from frame.cli import engine as commands
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


@pytest.mark.parametrize("feed,pattern", [("x", "NAME=FILE"), ("x=/nonexistent.npy", "cannot read"),
                                          ("z=/tmp/a.npy", "no input 'z'"), ("x=/tmp/a.txt", "not .npy")])
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


def _image_model(tmp_path, shape, layout="nchw"):
    """Per-channel means of the input, so the test can check what the image became."""
    axes = [0, 2, 3] if layout == "nchw" else [0, 1, 2]
    nodes = [helper.make_node("ReduceMean", ["x"], ["y"], axes=axes, keepdims=0)]
    proto = builders.model(nodes, [builders.value("x", shape)], [builders.value("y", None)], opset=13)
    return builders.save(proto, tmp_path / "image.onnx")


def _png(tmp_path, size=(30, 20), colour=(255, 0, 51)):
    from PIL import Image

    path = tmp_path / "in.png"
    Image.new("RGB", size, colour).save(path)
    return str(path)


def test_run_image_input_resized_normalised_and_top_values(tmp_path, capsys):
    path = _image_model(tmp_path, [1, 3, 8, 8])
    out = tmp_path / "o.npz"
    args = _parse(["engine", "run", path, "--input", f"x={_png(tmp_path)}", "--mean", "0.5,0.5,0.5", "--std",
                   "0.5,0.5,0.5", "--save", str(out), "--top", "2"])
    assert args.func(args) == 0
    with np.load(out) as data:
        np.testing.assert_allclose(data["y"], [1.0, -1.0, 51 / 255 * 2 - 1], rtol=1e-6)
    text = capsys.readouterr().out
    assert "y: float32[3]  top 2: 1 @ [0], -0.6" in text and "saved" in text


@pytest.mark.parametrize("argv, want", [
    (["--bgr"], [51 / 255, 0.0, 1.0]),
    (["--size", "4x6", "--layout", "nhwc"], [1.0, 0.0, 51 / 255]),
])
def test_run_image_bgr_and_nhwc(tmp_path, capsys, argv, want):
    layout = "nhwc" if "nhwc" in argv else "nchw"
    shape = [1, "h", "w", 3] if layout == "nhwc" else [1, 3, "h", "w"]
    path = _image_model(tmp_path, shape, layout)
    out = tmp_path / "o.npz"
    args = _parse(["engine", "run", path, "--input", f"x={_png(tmp_path)}", *argv, "--save", str(out)])
    assert args.func(args) == 0
    assert "y: float32[3]" in capsys.readouterr().out
    with np.load(out) as data:  # the PNG is (255, 0, 51): [0, 1] values, channels in the order asked for
        np.testing.assert_allclose(data["y"], want, rtol=1e-6)


def test_run_grey_image_for_one_channel_models(tmp_path, capsys):
    path = _image_model(tmp_path, [1, 1, 5, 5])
    args = _parse(["engine", "run", path, "--input", f"x={_png(tmp_path, colour=(255, 255, 255))}", "--top", "1"])
    assert args.func(args) == 0
    assert "y: float32[1]  top 1: 1 @ [0]" in capsys.readouterr().out


def test_run_wav_input_mono_resampled(tmp_path, capsys):
    import wave

    samples = (np.sin(np.arange(800) / 5) * 16000).astype(np.int16)
    stereo = np.stack([samples, samples], axis=1)
    wav = tmp_path / "a.wav"
    with wave.open(str(wav), "wb") as writer:
        writer.setnchannels(2)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(stereo.tobytes())
    nodes = [helper.make_node("Shape", ["x"], ["y"]), helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0)]
    proto = builders.model(nodes, [builders.value("x", [1, "n"])],
                           [builders.value("y", None), builders.value("m", None)], opset=13)
    path = builders.save(proto, tmp_path / "audio.onnx")
    args = _parse(["engine", "run", path, "--input", f"x={wav}", "--sample-rate", "16000", "--save",
                   str(tmp_path / "o.npz")])
    assert args.func(args) == 0
    with np.load(tmp_path / "o.npz") as data:
        assert data["y"].tolist() == [1, 1600]
        assert 0.48 < float(data["m"]) <= 16000 / 32768 + 1e-6
    assert "y: float32[2]  top 2: 1600 @ [1], 1 @ [0]" in capsys.readouterr().out


@pytest.mark.parametrize("case, message", [
    ("missing", "missing --input for x: give each model input as --input NAME=FILE"),
    ("shape", "input 'x': shape"),
    ("dtype", "input 'x': dtype int64, expected float32"),
    ("save", "--save .*does not exist"),
])
def test_wrong_inputs_exit_2(tmp_path, capsys, case, message):
    """Wrong engine run inputs (missing, wrong shape or dtype, unwritable --save) exited 1 like a
    runtime failure; they are bad input: exit 2, one line."""
    import re

    from frame.cli.program import main

    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx")
    x = feeds["x"]
    arrays = {"shape": x[:, :-1], "dtype": x.astype(np.int64)}
    argv = ["engine", "run", path]
    if case != "missing":
        np.save(tmp_path / "x.npy", arrays.get(case, x))
        argv += ["--input", f"x={tmp_path / 'x.npy'}"]
    if case == "save":
        argv += ["--save", str(tmp_path / "no" / "out.npz")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
