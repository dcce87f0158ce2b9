"""Turning an uploaded photo into a gallery file: decoded safely, turned upright, scaled, re-encoded.

* Pillow decides what the bytes are (never the file name or the browser's content type): JPEG, PNG,
  WebP, AVIF and the other formats Pillow reads; HEIC/HEIF when the ``pillow-heif`` plugin is installed
  (``pip install pillow-heif``; not a dependency — phones' browsers send JPEG when the form does not
  ask for HEIC, see ``accepted_types``).
* Decompression bombs: the pixel count is checked from the header before any pixel is decoded
  (``MAX_PIXELS``, far below Pillow's own 179 MP error). JPEGs are decoded at a reduced scale straight
  away (``draft``), so a 48 MP phone photo costs ~12 MB instead of 144 MB in the daemon.
* EXIF orientation is applied to the pixels, so the panel, the gallery and the preview all see the photo
  the right way up. The stored file carries no EXIF at all: a family photo's GPS position is not served
  to the LAN.
* Stored at most ``MAX_SIDE`` px on its long side (enough for every panel in either orientation), as
  PNG when it came as PNG (lossless, e.g. a drawing) and as JPEG (quality 92) otherwise; transparency
  is flattened on white like the panel preparation does.
"""

from __future__ import annotations

import io
import logging
import warnings
from dataclasses import dataclass
from typing import Any

from frame.web.forms import FormError

log = logging.getLogger(__name__)

FIELD = "photo"
MAX_UPLOAD_BYTES = 20 * 1000 * 1000  # "20 MB" as phones count it
MAX_PIXELS = 60_000_000  # a 48 MP photo fits; beyond that it is a bomb or a panorama too big to decode here
MAX_SIDE = 2048
JPEG_QUALITY = 92


def heif_available() -> bool:
    """Whether HEIC/HEIF photos can be read: the ``pillow-heif`` plugin, registered on first call."""
    try:
        from pillow_heif import register_heif_opener
    except ImportError:
        return False
    register_heif_opener()
    return True


def accepted_types() -> str:
    """The file input's ``accept``: HEIC only when it can be read. An iPhone's browser converts its HEIC
    photos to JPEG when the form does not list HEIC, so the plugin is optional."""
    types = ["image/jpeg", "image/png", "image/webp"]
    if heif_available():
        types += ["image/heic", "image/heif"]
    return ",".join(types)


@dataclass(frozen=True)
class Photo:
    """A photo ready for the gallery: its encoded bytes, file suffix and pixel size."""

    data: bytes
    suffix: str
    width: int
    height: int
    source_format: str


def _open(data: bytes) -> Any:
    from PIL import Image, UnidentifiedImageError  # Pillow loads with the first upload, as for thumbnails

    heif_available()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise FormError(FIELD, "is not a picture this frame can read (JPEG, PNG, WebP"
                        f"{', HEIC' if heif_available() else ''})") from None
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise FormError(FIELD, "has too many pixels to be a photo") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise FormError(FIELD, f"is damaged or cut short: {exc}") from None
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise FormError(FIELD, f"is {width}×{height} pixels; at most {MAX_PIXELS // 1_000_000} megapixels")
    if width < 1 or height < 1:
        raise FormError(FIELD, "has no pixels")
    return image


def _upright(image: Any) -> Any:
    """Decoded (reduced while decoding when the format allows), EXIF-rotated, RGB on white."""
    from PIL import Image, ImageOps

    image.draft("RGB", (MAX_SIDE, MAX_SIDE))  # JPEG: scale 1/2..1/8 in the decoder; others ignore it
    try:
        image.load()
        upright = ImageOps.exif_transpose(image)
    except (OSError, SyntaxError, ValueError) as exc:
        raise FormError(FIELD, f"is damaged or cut short: {exc}") from None
    if upright.mode in ("RGBA", "LA", "PA") or (upright.mode == "P" and "transparency" in upright.info):
        rgba = upright.convert("RGBA")
        upright = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    upright = upright.convert("RGB")
    upright.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    return upright


def read_photo(data: bytes) -> Photo:
    """The gallery file for uploaded ``data``; FormError (field ``photo``) naming what is wrong."""
    if not data:
        raise FormError(FIELD, "is empty: choose a photo")
    if len(data) > MAX_UPLOAD_BYTES:
        raise FormError(FIELD, f"is {len(data) / 1e6:.1f} MB; at most {MAX_UPLOAD_BYTES // 1_000_000} MB")
    with _open(data) as image:
        source_format, source_size = image.format or "?", image.size
        picture = _upright(image)
    buffer = io.BytesIO()
    if source_format == "PNG":
        picture.save(buffer, "PNG", optimize=False, compress_level=6)
        suffix = ".png"
    else:
        picture.save(buffer, "JPEG", quality=JPEG_QUALITY, optimize=True)
        suffix = ".jpg"
    log.info("photo upload: %s %dx%d stored as %s %dx%d (%d bytes)", source_format, *source_size, suffix,
             picture.width, picture.height, buffer.tell())
    return Photo(buffer.getvalue(), suffix, picture.width, picture.height, source_format)
