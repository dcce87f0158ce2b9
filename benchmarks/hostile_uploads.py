"""The uploads of issue 27, made on the spot (nothing large is committed): the hostile ones that took
the daemon past 1 GB on main 74c5b74, and ordinary phone photos.

* ``rgba_bomb_png``: 7745×7745 RGBA PNG of ~250 KB (60 MP: under the photo limit, 240 MB decoded),
  written row by row through zlib, so making it costs no memory;
* ``wide_webp``: 16383×3600 WebP (the format's largest width; 59 MP, 236 MB decoded);
* ``png_24mp``: a 6000×4000 PNG (smooth, so it fits the 20 MB cap);
* ``jpeg_of_size``: a real noisy JPEG padded after its end marker to exactly ``size`` bytes (19.5 MB
  for the parallel uploads: every byte is sent and buffered, the decoder stops at the end marker).
"""

from __future__ import annotations

import io
import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def rgba_bomb_png(width: int = 7745, height: int = 7745) -> bytes:
    squeeze = zlib.compressobj(9)
    row = b"\0" + b"\0" * (width * 4)
    body = b"".join(squeeze.compress(row) for _ in range(height)) + squeeze.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


def wide_webp(width: int = 16383, height: int = 3600) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.linear_gradient("L").resize((width, height)).convert("RGB").save(buffer, "WEBP", quality=30, method=0)
    return buffer.getvalue()


def png_24mp(width: int = 6000, height: int = 4000) -> bytes:
    from PIL import Image

    gradient = Image.linear_gradient("L").resize((width, height))
    flipped = gradient.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = Image.merge("RGB", (gradient, gradient.rotate(90, expand=False), flipped))
    buffer = io.BytesIO()
    image.save(buffer, "PNG", compress_level=6)
    return buffer.getvalue()


def jpeg_of_size(size: int, pixels: tuple[int, int] = (4000, 3000), seed: int = 1) -> bytes:
    import numpy as np
    from PIL import Image

    noise = np.random.default_rng(seed).integers(0, 256, (pixels[1], pixels[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noise).save(buffer, "JPEG", quality=85)
    data = buffer.getvalue()
    if len(data) > size:
        raise ValueError(f"a {pixels} noise JPEG is already {len(data)} bytes > {size}")
    return data + b"\0" * (size - len(data))


def phone_photo(seed: int) -> bytes:
    """An ordinary 12 MP phone-sized JPEG (~3 MB)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    base = np.asarray(Image.linear_gradient("L").resize((4000, 3000)), dtype=np.int16)[:, :, None]
    pixels = np.clip(base + rng.integers(-30, 30, (3000, 4000, 3)), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()
