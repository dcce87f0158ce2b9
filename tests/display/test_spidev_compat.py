"""inky without spidev: the spidev look-alike over the ioctl device, and the inky driver handing it over."""

from __future__ import annotations

import struct
import types

import numpy as np
import pytest

from frame.display import spi
from frame.display.drivers.inky import InkyDriver, give_spi_without_spidev
from frame.display.spi import SpiDevice
from frame.display.spidev_compat import SpiDevCompat
from tests.display.test_spi import FakeSpiFd


def _compat(fake: FakeSpiFd) -> SpiDevCompat:
    return SpiDevCompat(lambda bus, device: SpiDevice(bus, device, bufsiz=fake.bufsiz, opener=fake.open,
                                                      ioctl=fake.ioctl, closer=fake.close))


def test_used_the_way_inky_uses_spidev() -> None:
    """inky: SpiDev(); open(0, cs); no_cs = True; max_speed_hz = ...; xfer3([cmd]); xfer3(data); writebytes."""
    fake = FakeSpiFd(bufsiz=4096)
    bus = _compat(fake)
    bus.open(0, 1)
    bus.no_cs = True
    bus.max_speed_hz = 5_000_000
    assert fake.path == "/dev/spidev0.1"
    assert fake.settings[-2:] == [(spi.SPI_IOC_WR_MODE, bytes([spi.SPI_NO_CS])),
                                  (spi.SPI_IOC_WR_MAX_SPEED_HZ, struct.pack("=I", 5_000_000))]
    assert bus.no_cs and bus.mode == 0 and bus.max_speed_hz == 5_000_000

    assert bus.xfer3([0x10]) == [0xEF]  # full duplex: the fake answers the complement
    image = np.arange(10_000, dtype=np.int64) % 7  # inky passes lists; an int64 array must go by value too
    bus.xfer3(image)
    bus.writebytes(image.astype(np.uint8).tolist())
    sent = [t for message in fake.messages for t in message]
    assert sent[0]["data"] == b"\x10"
    assert b"".join(t["data"] for t in sent[1:4]) == bytes(image.tolist())
    assert [t["len"] for t in sent[1:]] == [4096, 4096, 1808] * 2
    assert {t["speed_hz"] for t in sent} == {5_000_000}
    bus.close()
    assert fake.closed


def test_settings_before_open_are_applied_on_open() -> None:
    fake = FakeSpiFd()
    bus = _compat(fake)
    bus.mode = 3
    bus.max_speed_hz = 1_000_000
    bus.open(0, 0)
    assert fake.settings == [(spi.SPI_IOC_WR_MODE, b"\x03"), (spi.SPI_IOC_WR_BITS_PER_WORD, b"\x08"),
                             (spi.SPI_IOC_WR_MAX_SPEED_HZ, struct.pack("=I", 1_000_000))]
    with pytest.raises(ValueError):
        bus.xfer3([256])  # not a byte, as with spidev


def test_transfers_before_open_are_refused() -> None:
    with pytest.raises(OSError, match="not open"):
        _compat(FakeSpiFd()).writebytes([1])


class Board:
    """An inky board object fresh from ``inky.auto.auto()``: no SPI object yet."""

    def __init__(self) -> None:
        self._spi_bus = None
        self.width, self.height = 800, 480


Board.__name__ = "InkyE673"


def test_the_inky_driver_hands_inky_ioctl_spi_only_when_spidev_is_missing() -> None:
    board = Board()
    auto = types.SimpleNamespace(auto=lambda ask_user, verbose: board)
    driver = InkyDriver(None, inky_module=auto, has_spidev=lambda: False)
    driver.init()
    assert driver.panel.name == "inky-impression-7.3"
    assert isinstance(board._spi_bus, SpiDevCompat)

    with_spidev = Board()
    assert not give_spi_without_spidev(with_spidev, has_spidev=lambda: True)
    assert with_spidev._spi_bus is None  # inky makes its own spidev.SpiDev()
    given = object()
    with_spidev._spi_bus = given
    assert not give_spi_without_spidev(with_spidev, has_spidev=lambda: False)
    assert with_spidev._spi_bus is given
    assert not give_spi_without_spidev(types.SimpleNamespace(), has_spidev=lambda: False)  # unknown inky
