"""The starting picture of image-to-image: read any photo, fit it to the render size.

The rule (diffusers' ``VaeImageProcessor.resize(..., resize_mode="crop")``, bit for bit): scale the
picture with Lanczos, keeping its aspect ratio, until it covers the render size, then cut the
overflow equally from both sides (centre crop). The render size itself is a multiple of 64 pixels
(``sizes.check_size``), so the VAE's multiple-of-8 need is always met. A picture already at the
render size is used untouched — the case of "more like this" on a frame's own picture.

Reading a file honours the EXIF orientation (phones store portraits sideways), lets Pillow decode a
large JPEG at a reduced scale when that still leaves at least twice the render size (a 24-megapixel
photo would otherwise take 72 MB on a Pi with 512 MB), and puts transparent areas on white paper.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from frame.errors import UsageError


def open_image(path: str | os.PathLike, size: tuple[int, int] | None = None) -> Image.Image:
    """The picture at ``path`` as upright RGB; ``size`` (width, height) allows a reduced JPEG decode."""
    try:
        image = Image.open(path)
        if size is not None and image.format == "JPEG":
            image.draft("RGB", (2 * size[0], 2 * size[1]))
        image.load()
    except FileNotFoundError as exc:
        raise UsageError(f"init image {path}: no such file") from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise UsageError(f"init image {path}: not a picture Pillow can read ({exc})") from exc
    return to_rgb(ImageOps.exif_transpose(image))


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB, with transparency composited on white."""
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(paper, rgba).convert("RGB")
    return image.convert("RGB")


def fit(image: Image.Image, width: int, height: int) -> Image.Image:
    """Scale to cover ``width`` x ``height`` (Lanczos, aspect kept), then centre-crop to it."""
    image = to_rgb(image)
    if image.size == (width, height):
        return image
    if image.width < 1 or image.height < 1:
        raise UsageError("init image is empty")
    wider = width / height > image.width / image.height  # diffusers' _resize_and_crop arithmetic
    scaled_w = width if wider else image.width * height // image.height
    scaled_h = height if not wider else image.height * width // image.width
    resized = image.resize((scaled_w, scaled_h), resample=Image.LANCZOS)
    left, top = scaled_w // 2 - width // 2, scaled_h // 2 - height // 2
    return resized.crop((left, top, left + width, top + height))


def to_pixels(image: Image.Image) -> np.ndarray:
    """(1, 3, H, W) float32 in [-1, 1], the VAE encoder's input (diffusers' normalisation)."""
    array = np.asarray(image.convert("RGB"), dtype=np.float32) / np.float32(255.0)
    return (np.float32(2.0) * array - np.float32(1.0)).transpose(2, 0, 1)[None].copy()


def pixels_hash(pixels: np.ndarray) -> str:
    """Short hex digest of the fitted picture (recorded in the PNG and in resume checkpoints)."""
    return hashlib.sha256(np.ascontiguousarray(pixels, dtype=np.float32).tobytes()).hexdigest()[:16]
