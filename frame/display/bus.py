"""The tiny hardware seam: a Bus moves bytes over SPI and reads/writes GPIO pins.

Drivers speak only to this protocol, so tests swap in a recording fake (``tests/display/fakes.py``).
The real implementation talks SPI through ``/dev/spidevB.C`` with ioctls (``frame.display.spi``: no
compiled extension to install), or through the ``spidev`` package when that happens to be installed,
and drives pins with ``gpiod`` v2 (wheels for the Pi), falling back to ``lgpio``. Hardware modules
load inside ``open()`` only: importing ``frame.display`` never touches hardware libraries.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from frame.display.spi import SpiDevice, read_bufsiz
from frame.errors import FrameError
from frame.install_hints import extra_hint

log = logging.getLogger(__name__)

SPI_HINT = ("enable SPI (sudo raspi-config > Interface Options > SPI, or dtparam=spi=on in "
            "/boot/firmware/config.txt) and reboot")


class BusError(FrameError):
    """The SPI device or GPIO lines could not be opened or used."""


class Bus(Protocol):
    """What a panel driver needs from the hardware."""

    def write_pin(self, pin: int, value: int) -> None: ...

    def read_pin(self, pin: int) -> int: ...

    def spi_write(self, data: bytes) -> None: ...

    def close(self) -> None: ...



Importer = Callable[[str], ModuleType]
SpiFactory = Callable[[int, int], SpiDevice]


class _SpidevPort:
    """The ``spidev`` package behind the same ``write``/``close`` as :class:`SpiDevice`."""

    def __init__(self, spi: Any, bufsiz: int) -> None:
        self._spi, self.bufsiz = spi, bufsiz

    def configure(self, bus: int, device: int, speed_hz: int) -> _SpidevPort:
        self._spi.open(bus, device)
        self._spi.max_speed_hz = speed_hz
        self._spi.mode = 0
        return self

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), self.bufsiz):
            self._spi.writebytes2(data[start:start + self.bufsiz])

    def close(self) -> None:
        self._spi.close()


class SpiGpioBus:
    """SPI (hardware chip select CE0, mode 0) plus gpiod v2, falling back to lgpio, for pins.

    SPI goes through the ``spidev`` package if it is importable, otherwise through ioctls on the
    device file (:class:`frame.display.spi.SpiDevice`); both split writes at the kernel's
    ``spidev.bufsiz``. ``importer`` resolves module names and ``spi_factory`` builds the ioctl device
    (tests pass fakes); ``bufsiz`` defaults to the running kernel's.
    """

    def __init__(self, outputs: tuple[int, ...], inputs: tuple[int, ...], spi_bus: int = 0,
                 spi_device: int = 0, speed_hz: int = 4_000_000, chip: str = "/dev/gpiochip0",
                 importer: Importer = importlib.import_module, spi_factory: SpiFactory | None = None,
                 bufsiz: int | None = None) -> None:
        self.outputs, self.inputs = outputs, inputs
        self.spi_bus, self.spi_device, self.speed_hz, self.chip = spi_bus, spi_device, speed_hz, chip
        self._importer = importer
        self.bufsiz = bufsiz if bufsiz is not None else read_bufsiz()
        self._spi_factory = spi_factory or (lambda bus, device: SpiDevice(bus, device, bufsiz=self.bufsiz))
        self._spi: SpiDevice | _SpidevPort | None = None
        self._lines = None  # gpiod request or lgpio handle
        self._lgpio = None
        self._value = None  # gpiod.line.Value

    def _import(self, name: str, hint: str) -> ModuleType:
        try:
            return self._importer(name)
        except ImportError:
            raise BusError(f"the Python module {name!r} is missing: {hint}") from None

    def open(self) -> SpiGpioBus:
        try:
            self._spi = self._open_spi()
        except OSError as exc:
            self.close()
            raise BusError(f"cannot open /dev/spidev{self.spi_bus}.{self.spi_device} ({exc}): {SPI_HINT}; "
                           "the user also needs to be in the 'spi' group") from None
        try:
            self._open_gpio()
        except Exception:
            self.close()
            raise
        return self

    def _open_spi(self) -> SpiDevice | _SpidevPort:
        try:
            spidev = self._importer("spidev")
        except ImportError:
            spidev = None
        if spidev is not None:
            log.debug("SPI through the spidev package")
            port = _SpidevPort(spidev.SpiDev(), self.bufsiz)
            try:
                return port.configure(self.spi_bus, self.spi_device, self.speed_hz)
            except OSError:
                port.close()
                raise
        log.debug("SPI through ioctls on /dev/spidev%d.%d", self.spi_bus, self.spi_device)
        device = self._spi_factory(self.spi_bus, self.spi_device).open()
        try:
            return device.configure(mode=0, bits_per_word=8, speed_hz=self.speed_hz)
        except OSError:
            device.close()
            raise

    def _open_gpio(self) -> None:
        try:
            gpiod = self._importer("gpiod")
            line = self._importer("gpiod.line")  # only gpiod >= 2 has it
        except ImportError:
            gpiod = None
        if gpiod is not None:
            direction, self._value = line.Direction, line.Value
            config = {pin: gpiod.LineSettings(direction=direction.OUTPUT, output_value=self._value.INACTIVE)
                      for pin in self.outputs}
            config.update({pin: gpiod.LineSettings(direction=direction.INPUT) for pin in self.inputs})
            try:
                self._lines = gpiod.request_lines(self.chip, consumer="frame", config=config)
            except OSError as exc:
                raise BusError(f"cannot claim GPIO lines {self.outputs + self.inputs} on {self.chip} ({exc}): "
                               "is another program using the panel? is the user in the 'gpio' group?") from None
            return
        lgpio = self._import("lgpio", "neither gpiod >= 2 nor lgpio can be imported, so the panel's pins cannot "
                                      "be driven; " + extra_hint("pi"))
        try:
            self._lgpio = lgpio
            self._lines = lgpio.gpiochip_open(0)
            for pin in self.outputs:
                lgpio.gpio_claim_output(self._lines, pin, 0)
            for pin in self.inputs:
                lgpio.gpio_claim_input(self._lines, pin)
        except lgpio.error as exc:
            raise BusError(f"cannot claim GPIO lines with lgpio ({exc}): is the user in the 'gpio' group?") from None

    def write_pin(self, pin: int, value: int) -> None:
        if self._lgpio is not None:
            self._lgpio.gpio_write(self._lines, pin, int(bool(value)))
        else:
            self._lines.set_value(pin, self._value.ACTIVE if value else self._value.INACTIVE)

    def read_pin(self, pin: int) -> int:
        if self._lgpio is not None:
            return int(self._lgpio.gpio_read(self._lines, pin))
        return int(self._lines.get_value(pin) == self._value.ACTIVE)

    def spi_write(self, data: bytes) -> None:
        self._spi.write(data)

    def close(self) -> None:
        """Release SPI and GPIO; safe to call twice and after a failed open."""
        if self._spi is not None:
            try:
                self._spi.close()
            except OSError as exc:
                log.warning("closing SPI failed: %s", exc)
            self._spi = None
        if self._lines is not None:
            try:
                if self._lgpio is not None:
                    self._lgpio.gpiochip_close(self._lines)
                else:
                    self._lines.release()
            except OSError as exc:
                log.warning("releasing GPIO failed: %s", exc)
            self._lines = None
