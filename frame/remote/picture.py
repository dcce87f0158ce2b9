"""Checking the picture a render server returns before frame stores it as tonight's.

A1111's API answers with base64 image data (PNG by default; JPEG or WebP when the server's
``samples_format`` says so, sometimes with a ``data:image/...;base64,`` prefix). A picture is accepted
only when it decodes completely — a PNG must end with its IEND chunk and pass its CRCs, so a body cut
short by a dying server or a proxy is caught even where Pillow would paint the missing rows grey — and
has exactly the size that was asked for.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings

from PIL import Image, UnidentifiedImageError

from frame.diffusion.img2img import fit
from frame.remote.errors import BAD_IMAGE, WRONG_SIZE, RemoteUnavailable

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_END = b"IEND\xaeB`\x82"  # the IEND chunk type and its CRC: the last 8 bytes of every whole PNG


def decode_base64_image(text: object) -> bytes:
    """The bytes of one base64 image string (an optional ``data:`` prefix is dropped)."""
    if not isinstance(text, str) or not text:
        raise RemoteUnavailable(BAD_IMAGE, "the answer holds no image data")
    if text.startswith("data:"):
        text = text.partition(",")[2]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RemoteUnavailable(BAD_IMAGE, f"the image is not valid base64 ({exc})") from None


def check_picture(data: bytes | bytearray, width: int, height: int) -> Image.Image:
    """The decoded RGB picture, or RemoteUnavailable (bad-image / wrong-size) saying what is wrong.

    The size is read from the header and checked before a single pixel is decoded: a hostile or broken
    server's 10000×10000 PNG (300 MB of pixels from a few hundred KB) must not be unpacked on a 512 MB
    frame only to be refused afterwards; one past Pillow's bomb limit is refused as it opens."""
    if data.startswith(PNG_SIGNATURE) and not data.rstrip(b"\0").endswith(PNG_END):
        raise RemoteUnavailable(BAD_IMAGE, f"the PNG is truncated ({len(data)} bytes, no end chunk)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the size is checked right here
            probe = Image.open(io.BytesIO(data))
            if probe.size != (width, height):
                raise RemoteUnavailable(WRONG_SIZE, f"the picture is {probe.width}x{probe.height}, "
                                                    f"{width}x{height} was asked for")
            probe.verify()  # chunk CRCs (PNG); verify() leaves the image unusable, so open it again
        image = Image.open(io.BytesIO(data))
        image.load()
    except Image.DecompressionBombError as exc:
        raise RemoteUnavailable(WRONG_SIZE, f"the picture is far larger than {width}x{height} ({exc})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise RemoteUnavailable(BAD_IMAGE, f"the picture does not decode ({exc})") from None
    return image.convert("RGB")


def init_picture_png(data: bytes, width: int, height: int) -> bytes:
    """The image-to-image start picture as a PNG of exactly ``width`` x ``height``, for ComfyUI.

    ComfyUI paints at the size its ``LoadImage`` reads (``VAEEncode`` of the picture as it is), where
    AUTOMATIC1111 resizes the picture to the job's size itself: a 128x96 photo for a 96x64 job came
    back 128x96 and was refused as the wrong size. It is fitted as frame's own image-to-image does
    (``frame.diffusion.img2img.fit``: cover, centre crop, transparency on white); a picture already
    RGB at that size is sent as it is."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.size == (width, height) and image.mode == "RGB":
                return data
            image.load()
            fitted = fit(image, width, height)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise RemoteUnavailable(BAD_IMAGE, f"the picture to paint over is not one Pillow can read ({exc})") from None
    out = io.BytesIO()
    fitted.save(out, format="PNG")
    return out.getvalue()
