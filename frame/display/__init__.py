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

from typing import TYPE_CHECKING, Any

from frame.display.panels import Panel, get_palette, get_panel, palette_names, panel_names

if TYPE_CHECKING:
    from PIL import Image

    from frame.display.device import Display, DisplaySettings

__all__ = ["Panel", "get_panel", "get_palette", "panel_names", "palette_names", "prepare", "open_display"]


def prepare(image: Any, panel: Panel, fit: str = "cover", rotate: int = 0, saturation: float | None = None,
            dither: str | None = None) -> Image.Image:
    """See :func:`frame.display.preparation.prepare` (imported lazily: it needs numpy and Pillow)."""
    from frame.display.preparation import prepare as _prepare

    return _prepare(image, panel, fit=fit, rotate=rotate, saturation=saturation, dither=dither)


def open_display(settings: DisplaySettings, state_dir: Any = None, **kwargs: Any) -> Display:
    """See :func:`frame.display.device.open_display` (imported lazily: drivers need numpy and Pillow)."""
    from frame.display.device import open_display as _open

    return _open(settings, state_dir=state_dir, **kwargs)
