"""The panel table: names, did-you-mean errors, virtual panel customisation, single palette source."""

from __future__ import annotations

import pytest

from frame.config.panels import PALETTES, PANELS, get_palette, parse_size
from frame.display import get_panel, palette_names, panel_names
from frame.errors import UsageError


def test_required_panels_exist_with_their_geometry_and_native_codes() -> None:
    names = panel_names()
    for name in ("virtual", "waveshare-7in5-v2", "waveshare-7in3f", "waveshare-7in3e", "inky"):
        assert name in names
    spectra = get_panel("waveshare-7in3e")
    assert spectra.size == (800, 480)
    assert spectra.native_indices == (0, 1, 2, 3, 5, 6)
    assert spectra.colour_names == ("black", "white", "yellow", "red", "blue", "green")
    assert spectra.min_refresh_seconds >= 180
    assert get_panel("waveshare-7in5-v2").native_indices == (1, 0)
    assert len(get_panel("waveshare-7in3f").palette) == 7


def test_every_panel_palette_is_measured_not_ideal_and_matches_its_codes() -> None:
    for panel in PANELS.values():
        assert len(panel.palette) == len(panel.native_indices) == len(panel.colour_names)
        assert all(len(ink) == 3 and all(0 <= c <= 255 for c in ink) for ink in panel.palette)
    white = get_panel("waveshare-7in3e").palette[1]
    assert max(white) < 255  # a real Spectra 6 white is far from paper white


def test_unknown_panel_and_palette_suggest_the_closest_name() -> None:
    with pytest.raises(UsageError, match="did you mean 'waveshare-7in3e'"):
        get_panel("waveshare-7in3-e")
    with pytest.raises(UsageError, match="did you mean 'spectra6'"):
        get_palette("spectra-6")
    with pytest.raises(UsageError, match="choose one of"):
        get_panel("zzzz")


def test_virtual_panel_takes_size_and_palette() -> None:
    panel = get_panel("virtual", size="640x400", palette="acep7")
    assert panel.size == (640, 400)
    assert panel.palette == PALETTES["acep7"].colours
    assert panel.native_indices == tuple(range(7))
    with pytest.raises(UsageError):
        parse_size("640by400")


def test_inky_is_detected_at_open_time_not_by_name() -> None:
    with pytest.raises(UsageError, match="detected when the display is opened"):
        get_panel("inky")


def test_palette_names_cover_the_config_choices() -> None:
    assert {"spectra6", "acep7", "bw", "inky-spectra6"} <= set(palette_names())


def test_white_ink_is_not_mistaken_for_a_brighter_yellow() -> None:
    assert get_panel("waveshare-7in3f").white_index == 1  # ACeP yellow (255, 255, 68) outshines white
    assert get_panel("virtual", palette="inky-spectra6").white_index == 1
    assert get_panel("waveshare-7in5-v2").white_index == 1
