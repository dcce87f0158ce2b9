"""Turning files into model inputs for ``frame engine run``: .npy arrays, images and WAV audio.

For quick trials of any model: an image becomes a float32 batch of one in the layout and size the
model declares (NCHW or NHWC, resized to fixed declared dims or ``--size``), scaled to [0, 1] and
then normalised by ``--mean``/``--std`` (per channel), RGB or ``--bgr``, grey when the model takes
one channel. WAV audio (PCM 8/16/32-bit, any channels) becomes mono float32 in [-1, 1], resampled
linearly with ``--sample-rate``, shaped to the declared rank ([n], [1, n] or [1, 1, n]). A declared
integer dtype gets raw pixel values (uint8) or rounded samples. Whatever is loaded is then checked
by the engine like any feed, so a mismatch names the input and the expected shape.
"""

from __future__ import annotations

import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frame.errors import UsageError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


@dataclass
class InputOptions:
    size: tuple[int, int] | None = None  # (height, width)
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    bgr: bool = False
    layout: str | None = None  # "nchw" / "nhwc"; None: from the declared shape
    sample_rate: int | None = None


def parse_size(text: str) -> tuple[int, int]:
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size expects HEIGHTxWIDTH, e.g. 224x224, got {text!r}") from None
    if height < 1 or width < 1:
        raise UsageError(f"--size {text}: both sides must be positive")
    return height, width


def parse_floats(text: str, option: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"{option} expects comma-separated numbers, got {text!r}") from None


def load_input(path: str, info, options: InputOptions) -> np.ndarray:
    """The array for model input ``info`` (a ``TensorInfo``) from ``path``."""
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix in IMAGE_SUFFIXES:
            return _image(path, info, options)
        if suffix == ".wav":
            return _audio(path, info, options)
    except (OSError, ValueError, EOFError, wave.Error) as exc:
        raise UsageError(f"input {info.name}: cannot read {path}: {exc}") from exc
    raise UsageError(f"input {info.name}: {path} is not .npy, an image ({', '.join(IMAGE_SUFFIXES)}) or .wav")


def _fixed(dim) -> int | None:
    return dim if isinstance(dim, int) and dim > 0 else None


def _layout(info, options: InputOptions) -> str:
    if options.layout:
        return options.layout
    shape = info.shape or ()
    if len(shape) == 4 and _fixed(shape[-1]) in (1, 3, 4) and _fixed(shape[1]) not in (1, 3, 4):
        return "nhwc"
    return "nchw"


def _image(path: str, info, options: InputOptions) -> np.ndarray:
    from PIL import Image

    layout = _layout(info, options)
    shape = tuple(info.shape or (None, 3, None, None))
    if len(shape) not in (3, 4):
        raise UsageError(f"input {info.name}: declared rank {len(shape)} does not take an image (rank 3 or 4)")
    if len(shape) == 3:
        shape = (None, *shape)
    channels, height, width = (shape[1], shape[2], shape[3]) if layout == "nchw" else (shape[3], shape[1], shape[2])
    image = Image.open(path)
    image = image.convert("L" if _fixed(channels) == 1 else "RGB")
    size = options.size or (_fixed(height), _fixed(width))
    if size[0] and size[1] and (image.height, image.width) != tuple(size):
        image = image.resize((size[1], size[0]), Image.BILINEAR)
    pixels = np.asarray(image)
    pixels = pixels[:, :, None] if pixels.ndim == 2 else pixels
    if options.bgr:
        pixels = pixels[:, :, ::-1]
    if info.dtype is not None and info.dtype.kind in "iu":
        array = pixels.astype(info.dtype)
    else:
        for values, option in ((options.mean, "--mean"), (options.std, "--std")):
            if len(values) not in (1, pixels.shape[2]):
                raise UsageError(f"{option} gives {len(values)} values for an image of {pixels.shape[2]} channel(s)")
        array = (pixels.astype(np.float32) / 255 - np.float32(options.mean)) / np.float32(options.std)
        array = array.astype(info.dtype if info.dtype is not None else np.float32)
    array = array.transpose(2, 0, 1) if layout == "nchw" else array
    return np.ascontiguousarray(array[None] if len(info.shape or (0, 0, 0, 0)) == 4 else array)


def _audio(path: str, info, options: InputOptions) -> np.ndarray:
    with wave.open(path, "rb") as reader:
        width, channels, rate = reader.getsampwidth(), reader.getnchannels(), reader.getframerate()
        raw = reader.readframes(reader.getnframes())
    kinds = {1: (np.uint8, 128.0, 128.0), 2: (np.int16, 0.0, 32768.0), 4: (np.int32, 0.0, 2147483648.0)}
    if width not in kinds:
        raise ValueError(f"{8 * width}-bit PCM is not supported (8, 16 or 32-bit)")
    dtype, offset, full = kinds[width]
    samples = (np.frombuffer(raw, dtype).astype(np.float32) - offset) / full
    samples = samples.reshape(-1, channels).mean(axis=1)
    if options.sample_rate and options.sample_rate != rate and samples.size:
        count = max(1, round(samples.size * options.sample_rate / rate))
        samples = np.interp(np.arange(count) * rate / options.sample_rate, np.arange(samples.size), samples)
    samples = samples.astype(np.float32)
    if info.dtype is not None and info.dtype.kind in "iu":
        samples = np.rint(samples * full).astype(info.dtype)
    elif info.dtype is not None:
        samples = samples.astype(info.dtype)
    rank = len(info.shape) if info.shape is not None else 2
    return samples.reshape((1,) * max(rank - 1, 0) + (-1,))


def describe_output(name: str, array: np.ndarray, top: int) -> str:
    """``name: dtype[shape]`` and the ``top`` largest values with their indices (numeric outputs)."""
    line = f"{name}: {array.dtype}{list(array.shape)}"
    if top < 1 or array.size == 0 or array.dtype.kind not in "fiub":
        return line
    flat = array.reshape(-1).astype(np.float64)
    count = min(top, flat.size)
    best = np.argpartition(-flat, count - 1)[:count]
    best = best[np.argsort(-flat[best], kind="stable")]
    shown = ", ".join(f"{flat[i]:.6g} @ {[int(v) for v in np.unravel_index(i, array.shape)]}" for i in best)
    return f"{line}  top {count}: {shown}"
