"""Image work for the phone page in a short child: ``python -m frame.worker.imagechild JOB_JSON``.

Why a child: Pillow decoding in the daemon left it at 193 MiB after one 24 MP PNG and
peaked at 1191 MB for a 250 KB PNG of 7745×7745, and the allocator kept much of it. Here the memory
goes back to the system when the child exits, and the child runs under its own cap
(``childmain.cap_address_space``; Pillow only, no numpy, so an address-space limit is honest).

Decoding is bounded before any pixel is allocated, from the header alone:

* ``limits.max_pixels`` (width × height), the owner's photo limit;
* JPEG is decoded at a reduced scale straight away (``draft``: 1/2 … 1/8 in the decoder, by the long
  side, so any JPEG within ``max_pixels`` fits the budget);
* the pixels then to be held in memory (Pillow keeps 4 bytes a pixel for RGB and RGBA, 1 for L and
  P), plus the converted copy for modes that must be converted first, must fit ``limits.decode_bytes``;
  the refusal names that limit. Everything after the first reduction works on the small image.

Jobs (``frame.worker.shortjobs``): ``PhotoJob`` (the photo on stdin: upright, on white, at most
``max_side`` px, re-encoded without EXIF), ``ThumbsJob`` (gallery thumbnails, each written atomically).
"""

from __future__ import annotations

import io
import os
import sys
import warnings
from pathlib import Path
from typing import Any, BinaryIO

from PIL import Image, UnidentifiedImageError

from frame.worker.childmain import Refused, child_main
from frame.worker.shortjobs import ChildJob, ChildOutput, ImageLimits, PhotoJob, PhotoOutput, ThumbsJob, ThumbsOutput

# Modes Image.reduce works on; others are converted (one more copy, counted in the budget) first.
REDUCIBLE = ("L", "LA", "RGB", "RGBA", "RGBX", "I", "F")
EXIF_ORIENTATION = 0x0112
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
             5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_90}


def heif_available() -> bool:
    """Whether HEIC/HEIF can be read: the optional ``pillow-heif`` plugin, registered here."""
    try:
        from pillow_heif import register_heif_opener
    except ImportError:
        return False
    register_heif_opener()
    return True


def bytes_per_pixel(mode: str) -> int:
    """What Pillow keeps in memory per pixel of ``mode`` (multi-band images take 4 bytes)."""
    if mode in ("1", "L", "P"):
        return 1
    return 2 if mode.startswith("I;16") else 4


def working_mode(image: Any) -> str:
    """The mode the pixels are reduced in: RGBA when the image has transparency, else RGB/L as is."""
    if image.mode in REDUCIBLE:
        return image.mode
    transparent = image.mode in ("PA", "La") or "transparency" in image.info
    return "RGBA" if transparent else "RGB"


def webp_size(head: bytes) -> tuple[int, int] | None:
    """Width and height from a WebP file's first 30 bytes (None: not WebP). Pillow's WebP plugin
    allocates the whole canvas when it opens the file, so its size is checked before that."""
    if len(head) < 30 or head[:4] != b"RIFF" or head[8:12] != b"WEBP":
        return None
    chunk = head[12:16]
    if chunk == b"VP8X":  # extended: 24-bit canvas width-1 and height-1
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if chunk == b"VP8L":  # lossless: 14-bit width-1 and height-1 after the signature byte
        bits = int.from_bytes(head[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 ":  # lossy: 14-bit width and height after the start code
        return (int.from_bytes(head[26:28], "little") & 0x3FFF), (int.from_bytes(head[28:30], "little") & 0x3FFF)
    return None


def check_decoded_size(width: int, height: int, fmt: str, need: int, limits: ImageLimits) -> None:
    """Refuse what would not fit the photo limit or the decode budget, naming the limit."""
    if width * height > limits.max_pixels:
        raise Refused(f"is {width}×{height} pixels; at most {limits.max_pixels // 1_000_000} megapixels")
    if need > limits.decode_bytes:
        mb = limits.decode_bytes / 1e6
        raise Refused(f"is {width}×{height} pixels ({fmt}), {need / 1e6:.0f} MB once decoded; "
                      f"the frame decodes at most {mb:.0f} MB of pixels at once (about {mb / 4:.0f} megapixels; "
                      "JPEG photos are decoded at a reduced size, so larger ones fit)")


def open_bounded(source: str | Path | BinaryIO, limits: ImageLimits, draft_to: int) -> Any:
    """The image, header read and (JPEG) reduced scale chosen, its decoded size checked; nothing
    decoded yet. Refused names what is wrong."""
    if hasattr(source, "read"):
        head = source.read(30)
        source.seek(0)
        size = webp_size(head)
        if size is not None:
            check_decoded_size(*size, "WEBP", size[0] * size[1] * 4, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(source)
    except UnidentifiedImageError:
        raise Refused("is not a picture this frame can read (JPEG, PNG, WebP"
                      f"{', HEIC' if heif_available() else ''})") from None
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise Refused("has too many pixels to be a photo") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise Refused(f"is damaged or cut short: {exc}") from None
    width, height = image.size
    if width < 1 or height < 1:
        raise Refused("has no pixels")
    # JPEG: scale 1/2..1/8 in the decoder (others ignore it), keeping the long side >= draft_to; asked
    # of the long side only, so a panorama is reduced too and every JPEG within max_pixels fits
    image.draft("RGB", (draft_to, 1) if width >= height else (1, draft_to))
    pixels = image.size[0] * image.size[1]
    need = pixels * bytes_per_pixel(image.mode)
    if image.mode not in REDUCIBLE:
        need += pixels * bytes_per_pixel(working_mode(image))
    check_decoded_size(width, height, image.format or "?", need, limits)
    return image


def reduced(image: Any, longest: int) -> Any:
    """Decoded and reduced by an integer factor to no less than ``longest`` px on its long side (the
    full-size pixels are freed at once); RGB, RGBA or L."""
    try:
        image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise Refused(f"is damaged or cut short: {exc}") from None
    work = image if image.mode in REDUCIBLE else image.convert(working_mode(image))
    factor = max(1, max(work.size) // longest)
    if factor > 1:
        work = work.reduce(factor)
    if work is not image:
        image.close()  # the full-size pixels go before anything else is allocated
    return work


def upright_on_white(work: Any, orientation: int | None) -> Any:
    """EXIF orientation applied to the pixels, transparency flattened on white, RGB."""
    if orientation in TRANSPOSE:
        work = work.transpose(TRANSPOSE[orientation])
    if work.mode in ("RGBA", "LA"):
        rgba = work.convert("RGBA")
        work = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    return work.convert("RGB")


def make_photo(job: PhotoJob, source: BinaryIO) -> PhotoOutput:
    """The photo on ``source`` as the gallery keeps it (``frame.web.photos`` describes the choices)."""
    image = open_bounded(source, job.limits, job.max_side)
    source_format, source_size = image.format or "?", image.size
    try:
        orientation = image.getexif().get(EXIF_ORIENTATION)
    except (OSError, SyntaxError, ValueError):
        orientation = None
    picture = upright_on_white(reduced(image, job.max_side), orientation)
    picture.thumbnail((job.max_side, job.max_side), Image.Resampling.LANCZOS)
    suffix = ".png" if source_format == "PNG" else ".jpg"
    out = job.out.with_name(job.out.name + suffix)
    if suffix == ".png":
        picture.save(out, "PNG", optimize=False, compress_level=6)
    else:
        picture.save(out, "JPEG", quality=job.jpeg_quality, optimize=True)
    return PhotoOutput(out, picture.width, picture.height, source_format, *source_size)


def make_thumbs(job: ThumbsJob) -> ThumbsOutput:
    """Each thumbnail written atomically (a cut leaves no half file); one unreadable picture is
    reported and the rest still made."""
    made, failed = [], []
    for source, target in job.items:
        try:
            with open(source, "rb") as handle:
                image = open_bounded(handle, job.limits, job.size)
                small = upright_on_white(reduced(image, job.size), None)
            small.thumbnail((job.size, job.size))
            partial = target.with_name(target.name + ".part")
            small.save(partial, "JPEG", quality=82, optimize=True)
            os.replace(partial, target)
            made.append(target)
        except (Refused, OSError) as exc:
            failed.append((source, str(exc)))
    return ThumbsOutput(tuple(made), tuple(failed))


def run(job: ChildJob) -> ChildOutput:
    heif_available()
    if isinstance(job, PhotoJob):
        stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
        return make_photo(job, stdin if stdin.seekable() else io.BytesIO(stdin.read()))
    if isinstance(job, ThumbsJob):
        return make_thumbs(job)
    raise Refused(f"the image child does not do {job.kind} jobs")


def main(argv: list[str] | None = None) -> int:
    return child_main(sys.argv[1:] if argv is None else argv, run, cap_address=True)


if __name__ == "__main__":
    raise SystemExit(main())
