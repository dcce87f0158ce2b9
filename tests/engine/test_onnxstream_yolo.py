"""Real trained weights in OnnxStream's format: the YOLOv8n folder of OnnxStream's repository examples.

The folder (233 ops, 12 MB of float32 weights) and a photo are not committed: the test uses them from
``$FRAME_TEST_CACHE/onnxstream/`` (default ``~/.cache/frame-tests/onnxstream/``) when present and skips
otherwise. Put there: ``yolov8n_fp32/`` (examples/YOLOv8n_wasm/yolov8n_fp32 of OnnxStream's repository)
and ``bus.jpg`` (``ultralytics/assets/bus.jpg`` from the ultralytics wheel: ``pip download ultralytics
--no-deps``). frame's output must equal onnxruntime on the same graph written back as ONNX
(``tools/onnxstream_to_onnx.py``), and the detections must be the bus and the people in the photo.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from frame.engine import load_model

CACHE = Path(os.environ.get("FRAME_TEST_CACHE", Path.home() / ".cache" / "frame-tests")) / "onnxstream"
FOLDER, PHOTO = CACHE / "yolov8n_fp32", CACHE / "bus.jpg"
PERSON, BUS = 0, 5

pytestmark = pytest.mark.skipif(not (FOLDER / "model.txt").is_file() or not PHOTO.is_file(),
                                reason=f"OnnxStream's YOLOv8n example folder and bus.jpg not in {CACHE}")


def letterbox(path: Path, size: int = 640) -> tuple[np.ndarray, float]:
    image = Image.open(path).convert("RGB")
    scale = size / max(image.size)
    resized = image.resize((round(image.width * scale), round(image.height * scale)), Image.BILINEAR)
    canvas = Image.new("RGB", (size, size), (114, 114, 114))
    canvas.paste(resized, (0, 0))
    pixels = np.asarray(canvas, dtype=np.float32).transpose(2, 0, 1)[None] / 255
    return np.ascontiguousarray(pixels), scale


def detections(output: np.ndarray, scale: float, threshold: float = 0.5) -> list[tuple[int, float, np.ndarray]]:
    """(class, confidence, [x0, y0, x1, y1] in photo pixels) after a greedy per-class NMS at IoU 0.5."""
    boxes, scores = output[0, :4].T, output[0, 4:].T
    classes, confidence = scores.argmax(1), scores.max(1)
    corners = np.concatenate([boxes[:, :2] - boxes[:, 2:] / 2, boxes[:, :2] + boxes[:, 2:] / 2], 1) / scale
    kept: list[tuple[int, float, np.ndarray]] = []
    for i in np.argsort(-confidence):
        if confidence[i] < threshold:
            break
        if all(c != classes[i] or _iou(b, corners[i]) < 0.5 for c, _, b in kept):
            kept.append((int(classes[i]), float(confidence[i]), corners[i]))
    return kept


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.prod(np.clip(np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2]), 0, None))
    return float(inter / (np.prod(a[2:] - a[:2]) + np.prod(b[2:] - b[:2]) - inter))


def test_yolov8n_folder_finds_the_bus_and_the_people():
    pixels, scale = letterbox(PHOTO)
    with load_model(FOLDER) as model:
        assert model.op_counts["Conv"] == 64 and sum(model.op_counts.values()) == 233
        output = model.run({"images": pixels})["output0"]
    found = detections(output, scale)
    print([(c, round(s, 2), b.round()) for c, s, b in found])
    buses = [b for c, s, b in found if c == BUS and s > 0.8]
    people = [b for c, s, b in found if c == PERSON]
    assert len(buses) == 1 and buses[0][2] - buses[0][0] > 0.8 * Image.open(PHOTO).width  # the bus fills the width
    assert len(people) >= 3 and all(b[3] > 800 for b in people)  # standing on the pavement in front of it

    spec = importlib.util.spec_from_file_location("onnxstream_to_onnx",
                                                  Path(__file__).parents[2] / "tools" / "onnxstream_to_onnx.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool
    spec.loader.exec_module(tool)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(tool.to_onnx(str(FOLDER)).SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"images": pixels})[0]
    np.testing.assert_allclose(output, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
