"""Hostile sizes from a render server (A1111 and ComfyUI alike): a picture whose header claims a huge
size is refused from its header, before a single pixel is decoded on a 512 MB frame."""

from __future__ import annotations

import pytest
from PIL import Image

from frame.remote import RemoteUnavailable
from frame.remote.picture import check_picture
from tests.remote.fake_a1111 import png_of


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
