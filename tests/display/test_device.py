"""open_display: virtual panel files, Waveshare through a fake bus, inky through a fake module."""

from __future__ import annotations

import types
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from frame.display import open_display
from frame.display.device import DisplaySettings
from frame.display.drivers.base import PanelNotResponding
from frame.errors import FrameError, UsageError
from tests.display.fakes import FakeBus, FakeClock

SMALL = DisplaySettings(size="160x96")


def _photo(seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (120, 200, 3), dtype=np.uint8))


def test_virtual_panel_writes_simulation_and_side_by_side_preview(tmp_path) -> None:
    with open_display(SMALL, state_dir=tmp_path) as display:
        result = display.show(_photo())
    assert result.shown
    panel_png, preview_png = (tmp_path / "display" / "panel.png", tmp_path / "display" / "preview.png")
    assert result.paths == (str(panel_png), str(preview_png))
    simulated = np.asarray(Image.open(panel_png).convert("RGB"))
    inks = {tuple(ink) for ink in display.panel.palette}
    assert simulated.shape == (96, 160, 3)
    assert {tuple(p) for p in simulated.reshape(-1, 3)} <= inks  # every pixel in a measured ink colour
    assert Image.open(preview_png).size == (160 * 2 + 8, 96)
    assert not list((tmp_path / "display").glob("*.tmp"))  # atomic writes leave no temp files


def test_second_show_of_same_picture_is_skipped(tmp_path) -> None:
    with open_display(SMALL, state_dir=tmp_path) as display:
        assert display.show(_photo()).shown
        assert display.show(_photo()).status == "unchanged"
        assert display.show(_photo(), force=True).shown
        assert display.show(_photo(1)).shown


def test_too_soon_is_reported_with_retry_time_not_waited_for(tmp_path) -> None:
    clock = [5000.0]
    config = replace(SMALL, min_refresh_seconds=180)
    with open_display(config, state_dir=tmp_path, now=lambda: clock[0]) as display:
        assert display.show(_photo()).shown
        clock[0] += 30
        display.prepare = None  # must not be needed: the interval is checked first
        result = display.show(_photo(1))
    assert result.status == "too-soon" and result.retry_at == 5180.0


def test_stored_picture_for_another_palette_is_prepared_again(tmp_path) -> None:
    with open_display(SMALL, state_dir=tmp_path) as display:
        _, stored = display.prepare(_photo())
    with open_display(replace(SMALL, palette="acep7"), state_dir=tmp_path) as display:
        assert not display.matches(stored)
        result = display.show_prepared(stored, _photo())
        assert result.shown
        shown = Image.open(result.paths[0]).convert("RGB")
        assert {tuple(p) for p in np.asarray(shown).reshape(-1, 3)} <= set(display.panel.palette)
        with pytest.raises(UsageError, match="prepared for another panel"):
            display.show_prepared(stored)


def test_out_file_and_out_dir(tmp_path) -> None:
    out = tmp_path / "shots" / "frame.png"
    with open_display(SMALL, state_dir=tmp_path, out_file=out) as display:
        display.show(_photo())
    assert out.exists() and (tmp_path / "shots" / "frame-preview.png").exists()
    with open_display(replace(SMALL, out_dir=str(tmp_path / "elsewhere")), state_dir=tmp_path) as display:
        display.show(_photo(2))
    assert (tmp_path / "elsewhere" / "panel.png").exists()


def test_waveshare_panel_through_a_fake_bus_and_failure_keeps_next_show_possible(tmp_path) -> None:
    bus = FakeBus({0x04, 0x12, 0x02})
    config = DisplaySettings(panel="waveshare-7in3e", min_refresh_seconds=0, dither="floyd-steinberg")
    with open_display(config, state_dir=tmp_path, bus=bus, clock=FakeClock()) as display:
        assert display.show(_photo()).shown
        assert len(dict(bus.commands())[0x10]) == 192_000
        bus.fault = "dead"
        with pytest.raises(PanelNotResponding, match="dtparam=spi=on"):
            display.show(_photo(1))
        bus.fault = None
        assert display.show(_photo(1)).shown  # not skipped as "unchanged" after the failure
    assert bus.closed


def test_unknown_panel_name_is_a_usage_error_with_suggestion(tmp_path) -> None:
    with pytest.raises(UsageError, match="did you mean 'waveshare-7in5-v2'"):
        open_display(DisplaySettings(panel="waveshare-7in5v2"), state_dir=tmp_path)


def test_hardware_panel_without_spi_says_what_to_check(tmp_path) -> None:
    # No bus injected: the real bus is opened, and this machine has no spidev.
    with pytest.raises(FrameError, match="spidev.*raspi-config"):
        open_display(DisplaySettings(panel="waveshare-7in3e"), state_dir=tmp_path)


class InkyE673:
    """Stands in for inky's driver class of the same name, with its set_image behaviour for "P" images:
    convert to RGB, re-quantise without dither against the pure palette, remap to native codes."""

    resolution = (800, 480)
    DESATURATED_PALETTE = [[0, 0, 0], [255, 255, 255], [255, 255, 0], [255, 0, 0], [0, 0, 255], [0, 255, 0],
                           [255, 255, 255]]

    def __init__(self) -> None:
        self.images: list[Image.Image] = []
        self.buf = None
        self.shows = 0

    def set_image(self, image: Image.Image, saturation: float = 0.5) -> None:
        self.images.append(image)
        assert image.mode == "P" and len(image.palette.colors) == 6  # else inky would dither again
        palette = Image.new("P", (1, 1))
        palette.putpalette(np.array(self.DESATURATED_PALETTE, dtype=np.uint8).ravel().tobytes())
        quantised = image.convert("RGB").quantize(6, palette=palette, dither=Image.Dither.NONE)
        self.buf = np.array([0, 1, 2, 3, 5, 6])[np.asarray(quantised)]

    def show(self) -> None:
        self.shows += 1


def _fake_inky(board=None, error: Exception | None = None):
    def auto(ask_user: bool = False, verbose: bool = False):
        assert ask_user is False
        if error:
            raise error
        return board
    return types.SimpleNamespace(auto=auto)


def test_inky_is_detected_and_gets_palette_indices(tmp_path) -> None:
    board = InkyE673()
    with open_display(DisplaySettings(panel="inky"), state_dir=tmp_path, inky_module=_fake_inky(board)) as display:
        assert display.panel.name == "inky-impression-7.3"
        assert display.show(_photo()).shown
    sent = board.images[0]
    assert sent.size == (800, 480) and board.shows == 1
    # What inky ends up sending is exactly our dither, in the panel's native codes.
    ours = np.asarray(display.prepare(_photo())[1])
    assert np.array_equal(board.buf, np.array([0, 1, 2, 3, 5, 6])[ours])
    assert (ours == display.panel.colour_names.index("blue")).any()


def test_inky_not_found_and_model_mismatch_are_clear(tmp_path) -> None:
    with pytest.raises(FrameError, match="no Inky display detected.*dtoverlay=spi0-0cs"):
        open_display(DisplaySettings(panel="inky"), state_dir=tmp_path,
                     inky_module=_fake_inky(error=RuntimeError("No EEPROM detected!")))
    with pytest.raises(FrameError, match="EEPROM says 'inky-impression-7.3'"):
        open_display(DisplaySettings(panel="inky-impression-13.3"), state_dir=tmp_path,
                     inky_module=_fake_inky(InkyE673()))


def test_display_settings_are_the_display_sections_fields_with_its_defaults():
    """``DisplaySettings.from_section`` copies the ``display:`` section field by field: the two records
    must list the same fields, with the same defaults (the schema validates, display only reads)."""
    from dataclasses import fields

    from frame.config import DisplayConfig

    assert [f.name for f in fields(DisplaySettings)] == [f.name for f in fields(DisplayConfig)]
    assert DisplaySettings.from_section(DisplayConfig()) == DisplaySettings()
    section = DisplayConfig(panel="waveshare-7in3e", rotate=90, dither="atkinson", min_refresh_seconds=5)
    assert DisplaySettings.from_section(section) == DisplaySettings(panel="waveshare-7in3e", rotate=90,
                                                                    dither="atkinson", min_refresh_seconds=5)
