"""A ``spidev.SpiDev`` look-alike over :class:`frame.display.spi.SpiDevice`, for Pimoroni's inky library.

inky creates ``spidev.SpiDev()`` itself unless its board object already holds an SPI object, and
spidev compiles C on install. When spidev is not importable, the inky driver hands inky one of these
instead, so an Inky Impression works from wheels alone. Only what inky uses is here: ``open``,
``close``, ``mode``, ``no_cs``, ``bits_per_word``, ``max_speed_hz``, ``writebytes``/``writebytes2``
and ``xfer``/``xfer2``/``xfer3`` (full duplex, returning the bytes read, as spidev does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from frame.display.spi import SPI_NO_CS, SpiDevice


class SpiDevCompat:
    """spidev's attribute/method interface; settings made before ``open`` are applied on ``open``."""

    def __init__(self, device_factory: Callable[[int, int], SpiDevice] | None = None) -> None:
        self._factory = device_factory or (lambda bus, device: SpiDevice(bus, device))
        self._device: SpiDevice | None = None
        self._mode, self._bits, self._speed = 0, 8, 500_000

    def open(self, bus: int, device: int) -> None:
        self._device = self._factory(bus, device).open()
        try:
            self._device.configure(self._mode, self._bits, self._speed)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        if self._device is not None:
            self._device.close()
            self._device = None

    # ----- settings, applied at once when open ------------------------------------------------------
    @property
    def mode(self) -> int:
        return self._mode & 0x03

    @mode.setter
    def mode(self, value: int) -> None:
        self._set_mode((self._mode & ~0x03) | (int(value) & 0x03))

    @property
    def no_cs(self) -> bool:
        return bool(self._mode & SPI_NO_CS)

    @no_cs.setter
    def no_cs(self, value: bool) -> None:
        self._set_mode(self._mode | SPI_NO_CS if value else self._mode & ~SPI_NO_CS)

    def _set_mode(self, mode: int) -> None:
        if self._device is not None:
            self._device.set_mode(mode)
        self._mode = mode

    @property
    def bits_per_word(self) -> int:
        return self._bits

    @bits_per_word.setter
    def bits_per_word(self, value: int) -> None:
        if self._device is not None:
            self._device.set_bits_per_word(int(value))
        self._bits = int(value)

    @property
    def max_speed_hz(self) -> int:
        return self._speed

    @max_speed_hz.setter
    def max_speed_hz(self, value: int) -> None:
        if self._device is not None:
            self._device.set_speed_hz(int(value))
        self._speed = int(value)

    # ----- transfers ---------------------------------------------------------------------------------
    def _open_device(self) -> SpiDevice:
        if self._device is None:
            raise OSError("SPI device is not open")
        return self._device

    def writebytes(self, values: Iterable[int]) -> None:
        self._open_device().write(_as_bytes(values))

    writebytes2 = writebytes

    def xfer3(self, values: Iterable[int]) -> list[int]:
        return list(self._open_device().transfer(_as_bytes(values)))

    xfer = xfer2 = xfer3


def _as_bytes(values: bytes | bytearray | memoryview | Iterable[int]) -> bytes | bytearray | memoryview:
    """Byte buffers as they are; lists of ints (and numpy arrays, by value, never by raw buffer) as bytes."""
    if isinstance(values, bytes | bytearray | memoryview):
        return values
    if hasattr(values, "tolist"):  # bytes(ndarray) would copy an int64 array's raw 8-byte words
        values = values.tolist()
    return bytes(values)
