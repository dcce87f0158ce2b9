"""prepare(): reading, orientation, rotation, fit modes, the result's format, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from frame.display import get_panel, prepare
from frame.display.preparation import ImageReadError, fit_for_panel, fit_image, load_image
from frame.errors import UsageError

PANEL = get_panel("virtual", size=(80, 48), palette="spectra6")


def _left_red_right_blue(width: int = 60, height: int = 40) -> Image.Image:
    pixels = np.zeros((height, width, 3), dtype=np.uint8)
    pixels[:, : width // 2] = (255, 0, 0)
    pixels[:, width // 2:] = (0, 0, 255)
    return Image.fromarray(pixels)


def test_result_is_a_p_image_at_panel_size_with_the_measured_palette() -> None:
    result = prepare(_left_red_right_blue(), PANEL)
    assert result.mode == "P" and result.size == PANEL.size
    assert result.getpalette()[:18] == [c for ink in PANEL.palette for c in ink]
    assert np.asarray(result).max() < len(PANEL.palette)


def test_exif_orientation_is_applied(tmp_path) -> None:
    path = tmp_path / "phone.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: rotate 90 degrees clockwise to view
    _left_red_right_blue(60, 40).save(path, exif=exif, quality=95)
    upright = np.asarray(load_image(path))
    assert upright.shape == (60, 40, 3)
    assert upright[2, 20, 0] > 200 and upright[-3, 20, 2] > 200  # red now on top, blue at the bottom


def test_rotation_for_portrait_mounting_composes_upright_then_turns() -> None:
    portrait = Image.new("RGB", (48, 80), (255, 255, 255))
    portrait.paste((0, 0, 0), (0, 0, 48, 10))  # black band at the top of the upright picture
    turned = np.asarray(fit_for_panel(portrait, PANEL, "cover", rotate=90)[0])
    assert turned.shape == (48, 80, 3)
    assert turned[:, -5:].mean() < 40 and turned[:, :60].mean() > 200  # top edge is now on the right


def test_fit_modes() -> None:
    wide = _left_red_right_blue(200, 50)
    white = (185, 202, 205)
    cover = np.asarray(fit_image(wide, (80, 48), "cover", white)[0])
    assert cover.shape == (48, 80, 3)
    assert cover[:, 0, 0].min() > 200 and cover[:, -1, 2].min() > 200  # cropped, no bars
    contain, mask = fit_image(wide, (80, 48), "contain", white)
    contain = np.asarray(contain)
    assert tuple(contain[0, 40]) == white and tuple(contain[-1, 40]) == white  # padded with panel white
    assert np.asarray(mask)[0, 40] == 0 and np.asarray(mask)[24, 40] == 255
    padded = np.asarray(fit_image(wide, (80, 48), "blur-pad", white)[0])
    assert tuple(padded[0, 40]) != white  # blurred copy behind, not bars
    with pytest.raises(UsageError, match="unknown fit 'stretch'"):
        fit_image(wide, (80, 48), "stretch", white)


def test_contain_bars_are_pure_white_ink_even_when_rotated() -> None:
    result = np.asarray(prepare(_left_red_right_blue(200, 50), PANEL, fit="contain"))
    white = PANEL.colour_names.index("white")
    assert (result[:5] == white).all() and (result[-5:] == white).all()
    turned = np.asarray(prepare(_left_red_right_blue(200, 50), PANEL, fit="contain", rotate=90))
    assert (turned[:, :5] == white).all() and (turned[:, -5:] == white).all()
    assert (turned[:, 30:50] != white).any()


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path) -> None:
    path = tmp_path / "deep.png"
    ramp = np.tile(np.linspace(0, 65535, 64).astype(np.uint16), (8, 1))
    Image.fromarray(ramp).save(path)
    loaded = np.asarray(load_image(path))[..., 0]
    assert loaded[0, 0] == 0 and loaded[0, -1] == 255 and 100 < loaded[0, 32] < 160


def test_alpha_is_composited_on_white() -> None:
    transparent = Image.new("RGBA", (10, 10), (0, 0, 0, 0))
    assert np.asarray(load_image(transparent)).min() == 255


def test_saturation_and_dither_choices_are_validated() -> None:
    with pytest.raises(UsageError, match="saturation"):
        prepare(_left_red_right_blue(), PANEL, saturation=1.5)
    with pytest.raises(UsageError, match="unknown dither"):
        prepare(_left_red_right_blue(), PANEL, dither="fancy")
    with pytest.raises(UsageError, match="rotate"):
        prepare(_left_red_right_blue(), PANEL, rotate=45)
    for method in ("linear-serpentine", "floyd-steinberg", "atkinson", "ordered", "blue-noise", "none"):
        assert prepare(_left_red_right_blue(), PANEL, dither=method).size == PANEL.size


def test_unreadable_images_name_the_file_and_the_reason(tmp_path) -> None:
    with pytest.raises(ImageReadError, match=r"missing\.png: no such file"):
        prepare(tmp_path / "missing.png", PANEL)
    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    with pytest.raises(ImageReadError, match=r"notes\.png: not a picture format"):
        prepare(text, PANEL)
    truncated = tmp_path / "cut.png"
    noise = np.random.default_rng(0).integers(0, 255, (40, 60, 3), dtype=np.uint8)
    Image.fromarray(noise).save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:2000])
    with pytest.raises(ImageReadError, match=r"cut\.png"):
        prepare(truncated, PANEL)
    with pytest.raises(ImageReadError, match="directory"):
        prepare(tmp_path, PANEL)


def test_saturated_red_stays_red_on_a_colour_panel() -> None:
    result = np.asarray(prepare(Image.new("RGB", (80, 48), (230, 20, 20)), PANEL))
    red = PANEL.colour_names.index("red")
    assert (result == red).mean() > 0.6
