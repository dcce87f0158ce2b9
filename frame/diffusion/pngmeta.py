"""Generation parameters in the picture, as AUTOMATIC1111's web UI writes them: a ``parameters`` tEXt
chunk in a PNG, the EXIF UserComment in a JPEG or WebP (``save_image`` picks the format by extension).

Image viewers, A1111's "PNG Info" tab and civitai read this format, so a picture from the frame can be
re-created elsewhere::

    a lighthouse in a storm, oil painting
    Negative prompt: blurry, low quality
    Steps: 20, Sampler: Euler a, CFG scale: 7.5, Seed: 42, Size: 512x512, Model: demo, Version: frame 0.1.0

Image-to-image adds A1111's ``Denoising strength`` after ``Model`` (``Steps`` stays the full schedule,
as A1111 writes it: 20 steps at 0.6 run 12) and frame's own ``Init image hash`` (the first 16 hex
digits of the SHA-256 of the fitted starting picture), which A1111 readers ignore. A render whose noise
came from torch's CPU generator or A1111's NV source says so as A1111 does (``RNG: CPU``, ``RNG: NV``:
``frame.diffusion.noise``); frame's own source adds no field.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, PngImagePlugin

import frame
from frame.atomicfile import write_bytes_atomic
from frame.diffusion.samplers.registry import a1111_name


@dataclass(frozen=True)
class GenerationParameters:
    """Everything that determines a picture, in the units people quote."""

    prompt: str
    negative_prompt: str
    steps: int
    sampler: str
    guidance: float
    seed: int
    width: int
    height: int
    model: str
    denoising_strength: float | None = None  # image-to-image only
    init_image_hash: str | None = None
    rng: str | None = None  # A1111's name of the noise source (CPU, NV); None: frame's own (no field)

    def to_text(self) -> str:
        """The A1111 ``parameters`` text (prompt line, optional negative line, key: value line)."""
        lines = [self.prompt]
        if self.negative_prompt:
            lines.append(f"Negative prompt: {self.negative_prompt}")
        fields = [
            ("Steps", self.steps),
            ("Sampler", a1111_name(self.sampler)),
            ("CFG scale", f"{self.guidance:g}"),
            ("Seed", self.seed),
            ("Size", f"{self.width}x{self.height}"),
            ("Model", _quote(self.model)),
        ]
        if self.denoising_strength is not None:
            fields.append(("Denoising strength", f"{self.denoising_strength:g}"))
        if self.init_image_hash:
            fields.append(("Init image hash", self.init_image_hash))
        if self.rng:
            fields.append(("RNG", self.rng))
        fields.append(("Version", f"frame {frame.__version__}"))
        lines.append(", ".join(f"{key}: {value}" for key, value in fields))
        return "\n".join(lines)


def _quote(value: str) -> str:
    """A1111 quotes values containing its separators."""
    return json.dumps(value, ensure_ascii=False) if any(c in value for c in ',:"\n') else value


def png_bytes(image: Image.Image, parameters: str | None = None) -> bytes:
    """``image`` as PNG bytes with a ``parameters`` text chunk (from the argument or ``image.info``)."""
    text = parameters if parameters is not None else image.info.get("parameters")
    info = PngImagePlugin.PngInfo()
    if text:
        info.add_text("parameters", text)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


# File extensions frame writes and the format each names.
IMAGE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP"}
_EXIF_IFD, _USER_COMMENT = 0x8769, 0x9286


def image_format(path: str | os.PathLike) -> str:
    """The format ``path``'s extension names (PNG for a pipe or device such as ``/dev/stdout``);
    a ValueError naming the extensions frame writes for anything else."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix in IMAGE_FORMATS:
        return IMAGE_FORMATS[suffix]
    if not suffix and target.exists() and not target.is_file():
        return "PNG"
    named = f"extension {suffix!r}" if suffix else "no extension"
    raise ValueError(f"{path} has {named}; frame writes .png, .jpg/.jpeg or .webp pictures")


def image_bytes(image: Image.Image, fmt: str, parameters: str | None = None) -> bytes:
    """``image`` in ``fmt`` with the parameters text: PNG tEXt chunk, else EXIF UserComment encoded as
    A1111 (and piexif) do, ``UNICODE\0`` + UTF-16 big-endian."""
    if fmt == "PNG":
        return png_bytes(image, parameters)
    text = parameters if parameters is not None else image.info.get("parameters")
    exif = Image.Exif()
    if text:
        exif.get_ifd(_EXIF_IFD)[_USER_COMMENT] = b"UNICODE\0" + text.encode("utf-16-be")
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format=fmt, quality=95, exif=exif.tobytes())
    return buffer.getvalue()


def save_png(image: Image.Image, path: str | os.PathLike, parameters: str | None = None) -> None:
    """``save_image`` as PNG whatever the name."""
    save_image(image, path, parameters, "PNG")


def save_image(image: Image.Image, path: str | os.PathLike, parameters: str | None = None,
               fmt: str | None = None) -> None:
    """Save ``image`` in ``fmt`` (default: the format its extension names, see ``image_format``) with
    the atomic writer: a power cut or a full disk leaves the previous file, never a torn one (owners
    script ``frame render --out``). A symlink is followed; an existing non-regular file
    (``/dev/stdout``, a pipe) is written directly."""
    data = image_bytes(image, fmt or image_format(path), parameters)
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()
    if target.exists() and not target.is_file():
        with open(target, "wb") as handle:
            handle.write(data)
        return
    write_bytes_atomic(target, data, mode=0o666)  # 0o666 less the umask, as open() gives
