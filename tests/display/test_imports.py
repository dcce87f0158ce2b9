"""Importing frame and frame.display must stay cheap and never touch hardware libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frame.display.bus import BusError, SpiGpioBus

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("spidev", "gpiod", "lgpio", "RPi", "inky", "matplotlib", "sklearn", "torch", "epaper_dithering")


def _modules_after(code: str) -> set[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import frame",
    "import frame.display",
    "from frame.display import get_panel, prepare, open_display, panel_names, palette_names",
    "import frame.cli.display",
])
def test_import_loads_no_hardware_or_heavy_library(code) -> None:
    loaded = _modules_after(code)
    bad = {m for m in loaded if m.split(".")[0] in FORBIDDEN}
    assert not bad, f"{code!r} imported {sorted(bad)}"


def test_opening_and_using_the_virtual_panel_loads_no_hardware_library(tmp_path) -> None:
    code = ("from PIL import Image\nfrom frame.display import open_display\n"
            "from frame.display.device import DisplaySettings\n"
            f"d = open_display(DisplaySettings(size='40x24'), state_dir={str(tmp_path)!r})\n"
            "d.show(Image.new('RGB', (50, 30), (200, 100, 50)))\nd.close()")
    loaded = _modules_after(code)
    assert not {m for m in loaded if m.split(".")[0] in FORBIDDEN}


def test_real_bus_without_spidev_explains_how_to_enable_spi() -> None:
    bus = SpiGpioBus(outputs=(17, 25, 18), inputs=(24,))
    try:
        import spidev  # noqa: F401
    except ImportError:
        with pytest.raises(BusError, match="spidev.*dtparam=spi=on"):
            bus.open()
    else:  # pragma: no cover - only on a Pi
        pytest.skip("spidev is installed here")
    bus.close()  # closing a never-opened bus is harmless
