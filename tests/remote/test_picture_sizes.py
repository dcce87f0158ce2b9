"""Hostile sizes from a render server (A1111 and ComfyUI alike): a picture whose header claims a huge
size is refused from its header, before a single pixel is decoded on a 512 MB frame."""

from __future__ import annotations

import struct
import zlib

import pytest
from PIL import Image

from frame.remote import RemoteUnavailable
from frame.remote.picture import check_picture


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_of(width: int, height: int, rows: int | None = None) -> bytes:
    """A valid RGB PNG of ``width`` × ``height`` black pixels, compressed in one stream (a 10000² one is
    ~300 KB: what a decompression bomb looks like on the wire)."""
    packer = zlib.compressobj(9)
    row = b"\0" * (1 + 3 * width)
    body = b"".join(packer.compress(row) for _ in range(height if rows is None else rows)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


def test_the_helper_makes_real_pictures():
    image = check_picture(png_of(24, 8), 24, 8)
    assert image.size == (24, 8) and image.getpixel((3, 3)) == (0, 0, 0)


def test_a_huge_picture_is_refused_from_its_header_without_decoding(monkeypatch):
    decoded = []
    real_load = Image.Image.load

    def counting_load(self):
        decoded.append(self.size)
        return real_load(self)

    monkeypatch.setattr(Image.Image, "load", counting_load)
    with pytest.raises(RemoteUnavailable) as info:
        check_picture(png_of(10000, 10000), 512, 512)  # 100 M pixels: under Pillow's own bomb error
    assert info.value.reason == "wrong-size" and "10000x10000, 512x512 was asked for" in str(info.value)
    assert decoded == []  # 300 MB of pixels were never unpacked


def test_a_picture_past_pillows_bomb_limit_is_a_wrong_size_not_a_crash():
    with pytest.raises(RemoteUnavailable) as info:  # the header alone: 400 M pixels, one row of data
        check_picture(png_of(20000, 20000, rows=1), 512, 512)
    assert info.value.reason == "wrong-size" and "far larger than 512x512" in str(info.value)
