"""frame.display: put a picture on an e-paper panel so it looks as good as that panel allows.

Public API (stable; the daemon, web UI and config checker use it)::

    from frame.display import get_panel, prepare, open_display
    from frame.display.device import DisplaySettings
    panel = get_panel("waveshare-7in3e")          # .name .size .palette .native_indices
    image_p = prepare(image, panel, fit="cover", rotate=0, saturation=None, dither=None)
    with open_display(DisplaySettings.from_section(config.display), state_dir=...) as display:
        result = display.show(image)

Importing this package is cheap and never touches hardware libraries: numpy/Pillow load on the first
``prepare``; SPI, gpiod/lgpio and inky load only when a hardware panel is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.config.panels import Panel, get_palette, get_panel, palette_names, panel_names
    from frame.display.device import Display, DisplaySettings, open_display
    from frame.display.preparation import prepare

__all__ = ["Display", "DisplaySettings", "Panel", "get_palette", "get_panel", "open_display", "palette_names",
           "panel_names", "prepare"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Display": "frame.display.device",
    "DisplaySettings": "frame.display.device",
    "Panel": "frame.config.panels",
    "get_palette": "frame.config.panels",
    "get_panel": "frame.config.panels",
    "open_display": "frame.display.device",
    "palette_names": "frame.config.panels",
    "panel_names": "frame.config.panels",
    "prepare": "frame.display.preparation",
})
