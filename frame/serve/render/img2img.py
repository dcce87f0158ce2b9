"""The img2img fields of an AUTOMATIC1111 request, checked: the starting picture and its strength.

A1111 takes ``init_images`` as a list of base64 PNG/JPEG/WebP, each optionally behind a ``data:`` URL
prefix (``data:image/png;base64,...``, what its web UI sends), and ``denoising_strength`` (default
0.75) in (0, 1]. frame paints one picture per request from the first image.

``resize_mode``: how the picture meets ``width`` x ``height``. Left out, frame fits it as its own
pipeline does (``img2img.fit``: scale to cover, centre crop; A1111's mode 1 "Crop and resize"),
because frame's client sends none and a frame's own picture is already at the render size (used
untouched). 0 ("Just resize") stretches it to the size first; A1111's fill and latent-upscale modes
(2, 3) are refused with a 422 rather than painted differently from what was asked.

Every error names the field, for the 422 answer.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from frame.diffusion import strength as img2img_strength
from frame.diffusion.img2img import to_rgb
from frame.errors import UsageError

A1111_DEFAULT_STRENGTH = 0.75
MAX_INIT_PIXELS = 4096 * 4096  # a phone photo fits; a decompression bomb does not
RESIZE_MODES = {0: "just resize", 1: "crop and resize"}
_DATA_URL = re.compile(r"^data:[^,]*?;base64,", re.IGNORECASE)


class FieldError(ValueError):
    """A bad img2img field; the message starts with the field's name."""


def denoising_strength(body: dict[str, Any]) -> float:
    value = body.get("denoising_strength")
    if value is None:
        return A1111_DEFAULT_STRENGTH
    try:
        return img2img_strength.check_strength(value)
    except UsageError:
        raise FieldError(f"denoising_strength must be a number greater than 0 and at most 1, got {value!r}") from None


def check_steps(steps: int, strength: float) -> None:
    """Refuse a request whose ``int(steps * strength)`` runs no step, before it is queued."""
    try:
        img2img_strength.first_step(steps, strength)
    except UsageError as exc:
        raise FieldError(f"denoising_strength: {exc}") from None


def init_image(body: dict[str, Any]) -> Image.Image:
    """The first of ``init_images``, decoded to upright RGB (not yet fitted to the render size)."""
    items = body.get("init_images")
    if not isinstance(items, list) or not items:
        raise FieldError("init_images: img2img needs a list with one base64 picture (PNG or JPEG)")
    text = items[0]
    if not isinstance(text, str) or not text.strip():
        raise FieldError("init_images[0] must be a base64 string")
    try:
        data = base64.b64decode(_DATA_URL.sub("", text.strip()), validate=True)
    except (binascii.Error, ValueError):
        raise FieldError("init_images[0] is not valid base64") from None
    try:
        picture = Image.open(io.BytesIO(data))
        width, height = picture.size
        if width * height > MAX_INIT_PIXELS:
            raise FieldError(f"init_images[0] is {width}x{height}: at most {MAX_INIT_PIXELS} pixels")
        picture.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        if isinstance(exc, FieldError):
            raise
        raise FieldError(f"init_images[0] is not a picture Pillow can decode ({exc})") from None
    return to_rgb(ImageOps.exif_transpose(picture))


def resized(picture: Image.Image, body: dict[str, Any], width: int, height: int) -> Image.Image:
    """``picture`` as ``resize_mode`` asks; the pipeline's own fit (cover + centre crop) does the rest."""
    mode = body.get("resize_mode")
    if mode is None or mode == 1:
        return picture
    if isinstance(mode, bool) or not isinstance(mode, (int, float)) or not math.isfinite(mode) \
            or mode not in RESIZE_MODES:
        raise FieldError(f"resize_mode: frame paints {', '.join(f'{k} ({v})' for k, v in RESIZE_MODES.items())}, "
                         f"got {mode!r}")
    return picture if picture.size == (width, height) else picture.resize((width, height), Image.LANCZOS)
