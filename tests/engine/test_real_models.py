"""Real trained models from PyPI wheels.

Default run: the two small committed models (tests/fixtures/real_models) against onnxruntime —
PaddleOCR's text-direction classifier, whose PaddlePaddle export names every free input axis "?"
(a 48x192 image was refused before issue 14), and silero-vad, whose network runs inside If branches
with LSTMs. ``slow``: the whole benchmark suite (benchmarks/engine_models.py), which downloads the
pinned wheels into its cache (``FRAME_MODEL_CACHE``) and checks every model's match and decision.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import engine_models, model_suite
from frame.engine import load_model
from tests.engine import builders

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "real_models"
CLS = MODELS / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
VAD = MODELS / "silero_vad.onnx"


def _scale_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def test_paddle_classifier_with_question_mark_dims_matches_onnxruntime():
    feeds = model_suite.ocr_cls_inputs(CLS)
    assert feeds["x"].shape == (1, 3, 48, 192)  # height and width differ, both declared "?"
    with load_model(str(CLS)) as model:
        assert model.inputs[0].shape == (-1, 3, "?", "?")
        assert model.rewrites["conv_affine"] > 0  # its Conv -> BatchNormalization pairs
        got = model.run(feeds)
        flipped = model.run({"x": np.ascontiguousarray(feeds["x"][:, :, ::-1, ::-1])})
    want = builders.ort_run(str(CLS), feeds)
    name = next(iter(want))
    assert _scale_error(got[name], want[name]) < 1e-3
    assert got[name].argmax() == want[name].argmax() == 0  # upright text
    assert flipped[name].argmax() == 1  # the same line upside down


def test_paddle_classifier_from_an_image_through_the_cli(tmp_path, capsys):
    import argparse

    from PIL import Image

    from frame.cli import engine as commands

    image = tmp_path / "line.png"
    Image.fromarray(model_suite.text_image("Stable Diffusion frame 2026", 60, 240, 27)).save(image)
    parser = argparse.ArgumentParser(prog="frame")
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["engine", "run", str(CLS), "--input", f"x={image}", "--size", "48x192", "--bgr",
                              "--mean", "0.5", "--std", "0.5", "--top", "1"])
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "[1, 2]  top 1:" in printed and printed.split("top 1:")[1].split("\n")[0].endswith("@ [0, 0]")


def test_silero_vad_streamed_matches_onnxruntime():
    audio = model_suite.speech_like_audio(seconds=1.5)
    inputs = {"audio": audio, "sr": np.array(16000, np.int64)}
    import onnxruntime

    session = onnxruntime.InferenceSession(str(VAD), providers=["CPUExecutionProvider"])
    want = engine_models._stream(lambda feeds: session.run(None, feeds), inputs)
    with load_model(str(VAD)) as model:
        assert sum(s.node.op_type == "If" for s in model.steps) == 1
        got = engine_models._stream(lambda feeds: list(model.run(feeds).values()), inputs)
    assert _scale_error(got[0], want[0]) < 1e-3 and _scale_error(got[1], want[1]) < 1e-3
    assert model_suite.speech_segments(got) == model_suite.speech_segments(want) != []


@pytest.mark.slow
@pytest.mark.parametrize("spec", model_suite.specs(), ids=lambda spec: spec.name)
def test_benchmark_suite_model_matches(spec):
    result = engine_models.benchmark(spec, engine_models.DEFAULT_CACHE, rounds=1, repeat=1)
    assert result["match"], result
    assert result["frame_peak_mb"] <= result["onnxruntime_peak_mb"], result
