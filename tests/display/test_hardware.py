"""Real-panel checks, deselected by default: ``pytest -m hardware tests/display`` on the Pi.

Set ``FRAME_TEST_PANEL`` to the fitted panel (e.g. ``waveshare-7in3e`` or ``inky``); look at the panel
afterwards: six ink bars above a smooth grey ramp.
"""

from __future__ import annotations

import os

import pytest

from frame.display import open_display
from frame.display.calibration import calibration_image
from frame.display.device import DisplaySettings

pytestmark = pytest.mark.hardware


@pytest.fixture
def panel_name() -> str:
    name = os.environ.get("FRAME_TEST_PANEL")
    if not name:
        pytest.skip("set FRAME_TEST_PANEL to the fitted panel's name")
    return name


def test_calibration_bars_on_the_real_panel(panel_name, tmp_path) -> None:
    config = DisplaySettings(panel=panel_name, min_refresh_seconds=0)
    with open_display(config, state_dir=tmp_path) as display:
        prepared, original = calibration_image(display.panel)
        assert display.show_prepared(prepared, original, force=True).shown


def test_clear_then_close_releases_the_hardware(panel_name, tmp_path) -> None:
    config = DisplaySettings(panel=panel_name, min_refresh_seconds=0)
    with open_display(config, state_dir=tmp_path) as display:
        display.clear()
    with open_display(config, state_dir=tmp_path):  # opening again proves the lines were released
        pass
