"""Turning an uploaded photo into a gallery file: decoded safely, turned upright, scaled, re-encoded.

The decoding runs in a short child (``python -m frame.worker.imagechild``, through
``frame.daemon.jobs.children``): the daemon never imports Pillow, and a photo's pixels never live in
its memory. The upload reaches the child as the temporary file the form's part was written
to (its stdin), the stored file comes back in a folder under ``<state_dir>/checkpoints``.

* Pillow decides what the bytes are (never the file name or the browser's content type): JPEG, PNG,
  WebP, AVIF and the other formats Pillow reads; HEIC/HEIF when the ``pillow-heif`` plugin is installed
  (``pip install pillow-heif``; not a dependency — phones' browsers send JPEG when the form does not
  ask for HEIC, see ``accepted_types``).
* Decompression bombs: the pixel count is checked from the header before any pixel is decoded
  (``MAX_PIXELS``, far below Pillow's own 179 MP error). JPEGs are decoded at a reduced scale straight
  away (``draft``), so a 48 MP phone photo costs ~12 MB instead of 144 MB. What is then to be decoded
  must fit ``DECODE_BYTES`` (a PNG or WebP of about 24 megapixels), in a child capped at
  ``children.IMAGE_CAP_MB``; one photo is decoded at a time, however many arrive together.
* EXIF orientation is applied to the pixels, so the panel, the gallery and the preview all see the photo
  the right way up. The stored file carries no EXIF at all: a family photo's GPS position is not served
  to the LAN.
* Stored at most ``MAX_SIDE`` px on its long side (enough for every panel in either orientation), as
  PNG when it came as PNG (lossless, e.g. a drawing) and as JPEG (quality 92) otherwise; transparency
  is flattened on white like the panel preparation does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from frame.atomicfile import make_dirs
from frame.daemon.jobs.children import IMAGE_CAP_MB, IMAGE_DECODE_BYTES, ChildBusy, ChildFailed, run_child
from frame.web.forms import FormError
from frame.worker.shortjobs import ImageLimits, PhotoJob, PhotoOutput

log = logging.getLogger(__name__)

FIELD = "photo"
MAX_UPLOAD_BYTES = 20 * 1000 * 1000  # "20 MB" as phones count it
MAX_PIXELS = 60_000_000  # a 48 MP photo fits; beyond that it is a bomb or a panorama too big to decode here
DECODE_BYTES = IMAGE_DECODE_BYTES
MAX_SIDE = 2048
JPEG_QUALITY = 92
DECODE_SECONDS = 120.0  # a 20 MB photo takes about a second here, several on a Pi Zero 2


def heif_available() -> bool:
    """Whether HEIC/HEIF photos can be read: the ``pillow-heif`` plugin is installed (the image child
    registers it; the daemon only looks whether it is there)."""
    return importlib.util.find_spec("pillow_heif") is not None


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


def _size(stream: BinaryIO | None) -> int:
    if stream is None:
        return 0
    stream.seek(0, 2)
    size = stream.tell()
    stream.seek(0)
    return size


def content_digest(stream: BinaryIO) -> str:
    """SHA-256 (hex) of the uploaded file, read in 1 MiB pieces from its temporary file and rewound:
    the photo's bytes never sit in the daemon's memory at once."""
    digest = hashlib.sha256()
    stream.seek(0)
    for piece in iter(lambda: stream.read(1 << 20), b""):
        digest.update(piece)
    stream.seek(0)
    return digest.hexdigest()


def read_photo(stream: BinaryIO | None, state_dir: Path) -> Photo:
    """The gallery file for the uploaded ``stream`` (a real file: the child reads it as its stdin);
    FormError (field ``photo``) naming what is wrong."""
    size = _size(stream)
    if not size:
        raise FormError(FIELD, "is empty: choose a photo")
    if size > MAX_UPLOAD_BYTES:
        raise FormError(FIELD, f"is {size / 1e6:.1f} MB; at most {MAX_UPLOAD_BYTES // 1_000_000} MB")
    folder = Path(state_dir) / "checkpoints" / f"child-upload-{secrets.token_hex(4)}"
    make_dirs(folder)  # transient: swept at start like the show folders
    job = PhotoJob(out=folder / "photo", limits=ImageLimits(MAX_PIXELS, DECODE_BYTES, IMAGE_CAP_MB),
                   max_side=MAX_SIDE, jpeg_quality=JPEG_QUALITY)
    try:
        result = run_child(job, timeout=DECODE_SECONDS, stdin=stream)
        if not isinstance(result, PhotoOutput):
            raise ChildFailed(f"the image child answered a {result.kind} job")
        data = result.file.read_bytes()
    except ChildBusy as exc:
        raise FormError(FIELD, f"could not be read now: {exc}") from None
    except ChildFailed as exc:
        raise FormError(FIELD, str(exc) if exc.refused else f"could not be read: {exc}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    log.info("photo upload: %s %dx%d stored as %s %dx%d (%d bytes)", result.source_format, result.source_width,
             result.source_height, result.file.suffix, result.width, result.height, len(data))
    return Photo(data, result.file.suffix, result.width, result.height, result.source_format)
