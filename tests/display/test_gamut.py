"""Tone compression and gamut mapping keep pictures inside what the inks can mix."""

from __future__ import annotations

import numpy as np
import pytest

from frame.config.panels import PALETTES
from frame.display import colour, gamut


def _inks(name: str) -> np.ndarray:
    return colour.srgb8_to_linear(np.array(PALETTES[name].colours, dtype=np.uint8))


def test_black_and_white_inks_are_found_even_when_yellow_is_brighter_than_white() -> None:
    assert gamut.black_white(_inks("acep7")) == (0, 1)
    assert gamut.black_white(_inks("spectra6")) == (0, 1)


@pytest.mark.parametrize("name", ["spectra6", "acep7", "inky-spectra6"])
def test_hull_contains_every_ink_and_mapped_colours_land_inside(name) -> None:
    inks = _inks(name)
    hull = gamut.build_gamut(inks)
    assert len(hull.normals) >= 4
    assert (inks @ hull.normals.T + hull.offsets).max() < 1e-9
    rng = np.random.default_rng(0)
    colours = rng.random((4000, 3)).astype(np.float32)
    mapped = gamut.map_into_gamut(hull, colours)
    assert (mapped @ hull.normals.T + hull.offsets).max() < 1e-5


def test_colours_well_inside_are_untouched_and_luminance_is_kept() -> None:
    inks = _inks("spectra6")
    hull = gamut.build_gamut(inks)
    inside = (0.4 * inks[1] + 0.4 * inks[0] + 0.2 * inks[3])[None].astype(np.float32)
    assert np.allclose(gamut.map_into_gamut(hull, inside), inside, atol=1e-6)
    vivid = np.array([[0.0, 0.0, 1.0]], dtype=np.float32)
    mapped = gamut.map_into_gamut(hull, vivid)
    lum = colour.luminance
    y_black, y_white = lum(inks[0]), lum(inks[1])
    assert lum(mapped)[0] == pytest.approx(np.clip(lum(vivid)[0], y_black, y_white), abs=1e-4)


def test_two_ink_panel_maps_to_grey_of_same_luminance() -> None:
    inks = _inks("bw")
    mapped = gamut.map_into_gamut(gamut.build_gamut(inks), np.array([[0.2, 0.5, 0.1]], dtype=np.float32))
    assert np.allclose(mapped[0], mapped[0][0], atol=1e-6)  # neutral


def test_tone_compression_only_when_needed() -> None:
    lab = np.zeros((10, 10, 3), dtype=np.float32)
    lab[..., 0] = np.linspace(20, 60, 100).reshape(10, 10)
    assert np.allclose(gamut.compress_tone(lab, 10.0, 70.0), lab)  # already fits
    lab[..., 0] = np.linspace(0, 100, 100).reshape(10, 10)
    squeezed = gamut.compress_tone(lab, 10.0, 70.0)[..., 0]
    assert squeezed.min() == pytest.approx(10.0, abs=0.5) and squeezed.max() == pytest.approx(70.0, abs=0.5)
    assert np.all(np.diff(squeezed.ravel()) >= 0)  # order of tones is kept


def test_saturation_zero_gives_grey() -> None:
    inks = np.array(PALETTES["spectra6"].colours, dtype=np.uint8)
    picture = np.array([[[200, 30, 30], [30, 30, 200]]], dtype=np.uint8)
    grey = gamut.prepare_colours(picture, inks, saturation=0.0)
    lab = colour.linear_to_lab(grey)
    assert np.abs(lab[..., 1:]).max() < 4.0  # the inks' own black/white are not perfectly neutral
