"""The starting picture: cover-and-centre-crop fit, EXIF orientation, transparency, reduced JPEG decode."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from frame.diffusion import img2img


def _bands(width: int, height: int) -> Image.Image:
    """Left third red, middle green, right third blue (top half brighter), to see what a crop kept."""
    array = np.zeros((height, width, 3), np.uint8)
    third = width // 3
    array[:, :third, 0] = 200
    array[:, third:2 * third, 1] = 200
    array[:, 2 * third:, 2] = 200
    array[: height // 2] += 50
    return Image.fromarray(array)


@pytest.mark.parametrize(("source", "target"), [((300, 100), (64, 64)), ((100, 300), (128, 64)),
                                                ((150, 101), (96, 64)), ((64, 64), (64, 64)), ((10, 7), (512, 320))])
def test_fit_gives_exactly_the_render_size(source, target):
    assert img2img.fit(_bands(*source), *target).size == target


def test_wide_picture_loses_equal_sides_and_tall_one_equal_top_and_bottom():
    wide = np.asarray(img2img.fit(_bands(300, 100), 64, 64))
    assert wide[:, 0, 1].min() > 150 and wide[:, -1, 1].min() > 150  # only the green middle third is left
    assert wide[:, :, 0].max() < 100 and wide[:, :, 2].max() < 100  # no red or blue third (200+)
    tall = np.asarray(img2img.fit(_bands(90, 400), 90, 90))
    assert (tall[:45, 45, 1] == 250).all() and (tall[45:, 45, 1] == 200).all()  # rows 155-244: the middle


def test_a_picture_at_the_render_size_is_untouched():
    picture = _bands(64, 64)
    assert img2img.fit(picture, 64, 64) is picture
    pixels = img2img.to_pixels(picture)
    assert pixels.shape == (1, 3, 64, 64) and pixels.dtype == np.float32
    assert pixels.min() == -1.0 + 2 * 0 and pixels.max() == pytest.approx(2 * 250 / 255 - 1)


def test_exif_orientation_is_honoured(tmp_path):
    path = tmp_path / "portrait.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: rotate 90 degrees clockwise to view
    _bands(120, 60).save(path, exif=exif, quality=95)
    assert img2img.open_image(path).size == (60, 120)


def test_transparency_becomes_white_paper(tmp_path):
    rgba = Image.new("RGBA", (16, 16), (10, 20, 30, 0))
    rgba.paste((200, 0, 0, 255), (0, 0, 8, 16))
    rgba.save(tmp_path / "cut-out.png")
    pixels = np.asarray(img2img.open_image(tmp_path / "cut-out.png"))
    assert pixels[0, 0].tolist() == [200, 0, 0] and pixels[0, 15].tolist() == [255, 255, 255]


def test_large_jpeg_is_decoded_at_a_reduced_scale(tmp_path):
    path = tmp_path / "big.jpg"
    _bands(2400, 1600).save(path, quality=90)
    picture = img2img.open_image(path, (96, 64))
    assert 192 <= picture.width < 2400 and picture.height >= 128  # at least twice the render size
    assert img2img.fit(picture, 96, 64).size == (96, 64)
    assert img2img.open_image(path).size == (2400, 1600)  # without a size: full resolution


def test_pixels_hash_tells_pictures_apart():
    a, b = img2img.to_pixels(_bands(64, 64)), img2img.to_pixels(_bands(64, 64).transpose(0))
    assert img2img.pixels_hash(a) == img2img.pixels_hash(a.copy()) != img2img.pixels_hash(b)
    assert len(img2img.pixels_hash(a)) == 16
