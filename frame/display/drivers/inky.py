"""Pimoroni Inky Impression panels through Pimoroni's own ``inky`` library (optional extra).

The HAT's EEPROM says which model is fitted; ``inky.auto.auto()`` reads it and returns the right
driver object, whose class tells us our panel entry (size and measured palette). ``inky`` is imported
only when the display is opened; tests inject a fake module through ``inky_module``.

inky declares ``spidev``, which is a source distribution only (C to compile on the Pi), so frame's Pi
install leaves it out (``requirements-pi.txt`` installs inky with ``--no-deps``). Every inky board
class takes an SPI object as ``spi_bus=`` (kept as ``_spi_bus``) and creates ``spidev.SpiDev()`` only
when that is None; without spidev we hand it :class:`~frame.display.spidev_compat.SpiDevCompat`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from frame.config.panels import Panel, get_panel
from frame.display.drivers.base import Driver, OpenRequest, PanelError
from frame.display.drivers.registry import register_driver
from frame.display.spidev_compat import SpiDevCompat
from frame.errors import FrameError
from frame.install_hints import extra_hint, pip_command

log = logging.getLogger(__name__)

# inky driver class -> our panel name (the class follows the controller chip).
MODELS = {
    ("InkyUC8159", (640, 400)): "inky-impression-4",
    ("InkyUC8159", (600, 448)): "inky-impression-5.7",
    ("InkyAC073TC1A", (800, 480)): "inky-impression-7.3-2023",
    ("InkyE673", (800, 480)): "inky-impression-7.3",
    ("InkyEL133UF1", (1600, 1200)): "inky-impression-13.3",
}
INKY_HINT = ("check the HAT is seated, I2C and SPI are enabled (dtparam=i2c_arm=on, dtparam=spi=on) and "
             "'dtoverlay=spi0-0cs' is in /boot/firmware/config.txt, then reboot")


def load_inky() -> Any:
    """The ``inky.auto`` module, or a clear error saying how to install it."""
    try:
        return importlib.import_module("inky.auto")
    except ImportError:
        raise FrameError("panel 'inky' needs Pimoroni's inky library: " + extra_hint("inky") + ", then "
                         + pip_command("inky", no_deps=True) + " (inky's spidev is not needed)") from None


def spidev_installed() -> bool:
    try:
        importlib.import_module("spidev")
    except ImportError:
        return False
    return True


def give_spi_without_spidev(board: Any, has_spidev: Callable[[], bool] = spidev_installed) -> bool:
    """Give ``board`` frame's ioctl SPI when it would otherwise import spidev and spidev is missing."""
    if getattr(board, "_spi_bus", False) is not None or has_spidev():
        return False
    board._spi_bus = SpiDevCompat()
    log.debug("inky talks SPI through frame's ioctl device (spidev is not installed)")
    return True


def detect(inky_module: Any) -> tuple[Any, Panel]:
    """Ask inky which board is fitted; map it to our panel entry."""
    try:
        board = inky_module.auto(ask_user=False, verbose=False)
    except Exception as exc:  # noqa: BLE001 - inky raises RuntimeError/OSError/ImportError variants
        raise FrameError(f"no Inky display detected ({exc}); {INKY_HINT}") from None
    resolution = tuple(board.resolution) if hasattr(board, "resolution") else (board.width, board.height)
    key = (type(board).__name__, resolution)
    if key not in MODELS:
        known = ", ".join(f"{cls} {w}x{h}" for cls, (w, h) in MODELS)
        raise FrameError(f"inky found an unsupported board {key[0]} {resolution[0]}x{resolution[1]}; "
                         f"supported: {known}")
    return board, get_panel(MODELS[key])


@register_driver("inky")
class InkyDriver(Driver):
    """Shows prepared pictures through an inky board object (detected in ``init``)."""

    @classmethod
    def open(cls, panel: Panel | None, request: OpenRequest) -> InkyDriver:
        """``panel`` None: the model is read from the HAT's EEPROM (``display.panel: inky``)."""
        driver = cls(panel, inky_module=request.inky_module)
        driver.init()  # reads the EEPROM: a model that differs from it is refused now, not after preparing
        return driver

    def __init__(self, panel: Panel | None = None, inky_module: Any = None,
                 has_spidev: Callable[[], bool] = spidev_installed) -> None:
        super().__init__(panel)  # None until detected
        self._module = inky_module
        self._has_spidev = has_spidev
        self._board = None

    def init(self) -> None:
        if self._board is not None:
            return
        module = self._module if self._module is not None else load_inky()
        self._board, detected = detect(module)
        if self.panel is not None and self.panel.name != detected.name:
            raise FrameError(f"configured panel {self.panel.name!r} but the EEPROM says {detected.name!r}; "
                             "set display.panel to 'inky' or the detected model")
        self.panel = detected
        give_spi_without_spidev(self._board, self._has_spidev)
        log.info("inky detected %s", detected.name)

    def show(self, prepared: Image.Image, original: Image.Image | None = None) -> list[str]:
        self.init()
        if prepared.size != self.panel.size:
            raise PanelError(f"{self.panel.name}: picture is {prepared.size}, panel is {self.panel.size}")
        self._board.set_image(self._for_inky(prepared))
        self._board.show()
        return []

    def _for_inky(self, prepared: Image.Image) -> Image.Image:
        """Indices in inky's colour order, with inky's own pure palette attached.

        7-colour boards take a "P" image's indices as they are. Spectra 6 boards convert it to RGB and
        re-quantise without dithering against their pure ``DESATURATED_PALETTE`` when the palette has
        exactly six colours, so pure colours come back as the same indices. (With our measured colours
        attached instead, the dark Spectra blue would snap to black.)
        """
        indices = np.asarray(prepared, dtype=np.uint8)
        codes = np.asarray(self.panel.native_indices, dtype=np.uint8)[indices]
        picture = Image.fromarray(codes, mode="P")
        count = len(self.panel.palette)
        pure = getattr(self._board, "DESATURATED_PALETTE", None)
        colours = [tuple(c) for c in pure[:count]] if pure is not None else list(self.panel.palette)
        picture.putpalette([int(c) for colour in colours for c in colour])
        return picture

    def clear(self) -> None:
        self.init()
        white = np.full(self.panel.size[::-1], self.panel.white_index, dtype=np.uint8)
        self.show(Image.fromarray(white, mode="P"))

    def sleep(self) -> None:
        """inky powers the panel down after every show."""

    def close(self) -> None:
        self._board = None

