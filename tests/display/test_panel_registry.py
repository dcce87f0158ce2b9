"""Panel rows name their driver by id; the driver registry resolves every id, and the docs list every panel."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from frame.config.panels import AUTO_PANELS, PANELS, DriverName, panel_names
from frame.display.device import DisplaySettings, open_display
from frame.display.drivers import DRIVERS, driver_for
from frame.display.drivers.base import Driver
from frame.display.drivers.registry import register_driver

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_has_a_registered_driver_and_every_driver_drives_a_row() -> None:
    assert set(DRIVERS) == set(get_args(DriverName))
    assert {p.driver for p in PANELS.values()} == set(DRIVERS)
    for panel in PANELS.values():
        assert issubclass(driver_for(panel.driver), Driver)


def test_an_unlisted_or_repeated_driver_id_is_refused() -> None:
    with pytest.raises(ValueError, match="not in frame.config.panels.DriverName"):
        register_driver("waveshare_13in3")
    with pytest.raises(ValueError, match="registered twice"):
        register_driver("virtual")


def test_docs_panel_table_lists_every_panel_name() -> None:
    docs = (ROOT / "docs/display.md").read_text().split("## Panels", 1)[1].split("\n\n", 2)[1]
    listed = set()
    for line in docs.splitlines()[2:]:
        first = line.split("|")[1]
        names = re.findall(r"`([^`]+)`", first)
        base = names[0]
        listed.add(base)
        # "`inky-impression-4` / `-5.7`": a suffix shares the first name's stem
        listed |= {base.rsplit("-", 1)[0] + n for n in names[1:] if n.startswith("-")}
    assert listed == set(panel_names())


def test_the_virtual_panel_opens_through_the_registry(tmp_path) -> None:
    with open_display(DisplaySettings(panel="virtual"), tmp_path) as display:
        assert type(display.driver) is driver_for("virtual")
        assert display.driver.out_dir == tmp_path / "display"
    assert set(AUTO_PANELS) <= set(panel_names())


def test_the_panel_table_stays_free_of_numpy_and_pillow() -> None:
    code = "import sys, frame.config.panels; print(sorted(m for m in ('numpy', 'PIL') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
