"""SPI through the kernel's spidev character device with ``fcntl.ioctl``: no compiled extension.

The ``spidev`` package on PyPI is a source distribution only, so ``pip install`` on a Pi would need
gcc and the Python headers. Everything it does for a panel is four ioctls on ``/dev/spidevB.C``
(``linux/spi/spidev.h``): set the mode, the bits per word and the maximum speed, and send
``SPI_IOC_MESSAGE`` with ``struct spi_ioc_transfer`` records pointing at our buffers. The request
numbers are computed here with the kernel's ``_IOC`` encoding (asm-generic, as on arm64 and x86),
and the tests compare them and the structure layout with the C header itself.

The kernel refuses a message whose transfers add up to more than ``spidev.bufsiz`` bytes (a module
parameter, 4096 unless changed), so writes are split into one transfer per ``bufsiz`` chunk.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# asm-generic/ioctl.h: | dir (2 bits) | size (14 bits) | type (8 bits) | nr (8 bits) |
_IOC_NRSHIFT, _IOC_TYPESHIFT, _IOC_SIZESHIFT, _IOC_DIRSHIFT = 0, 8, 16, 30
_IOC_SIZEBITS = 14
_IOC_WRITE, _IOC_READ = 1, 2

SPI_IOC_MAGIC = ord("k")
# spi.h mode bits (the low byte is what SPI_IOC_WR_MODE sets)
SPI_CPHA, SPI_CPOL, SPI_CS_HIGH, SPI_LSB_FIRST, SPI_3WIRE, SPI_LOOP, SPI_NO_CS, SPI_READY = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80)

# struct spi_ioc_transfer: __u64 tx_buf, rx_buf; __u32 len, speed_hz; __u16 delay_usecs;
# __u8 bits_per_word, cs_change, tx_nbits, rx_nbits, word_delay_usecs, pad. 32 bytes, no padding.
TRANSFER = struct.Struct("=QQIIHBBBBBB")

BUFSIZ_PATH = Path("/sys/module/spidev/parameters/bufsiz")
DEFAULT_BUFSIZ = 4096


def ioc(direction: int, kind: int, number: int, size: int) -> int:
    """The kernel's ``_IOC(dir, type, nr, size)``."""
    if not 0 <= size < 1 << _IOC_SIZEBITS:
        raise ValueError(f"ioctl argument size {size} does not fit in {_IOC_SIZEBITS} bits")
    return (direction << _IOC_DIRSHIFT) | (size << _IOC_SIZESHIFT) | (kind << _IOC_TYPESHIFT) | (
        number << _IOC_NRSHIFT)


def iow(kind: int, number: int, size: int) -> int:
    return ioc(_IOC_WRITE, kind, number, size)


def ior(kind: int, number: int, size: int) -> int:
    return ioc(_IOC_READ, kind, number, size)


SPI_IOC_RD_MODE = ior(SPI_IOC_MAGIC, 1, 1)
SPI_IOC_WR_MODE = iow(SPI_IOC_MAGIC, 1, 1)
SPI_IOC_RD_BITS_PER_WORD = ior(SPI_IOC_MAGIC, 3, 1)
SPI_IOC_WR_BITS_PER_WORD = iow(SPI_IOC_MAGIC, 3, 1)
SPI_IOC_RD_MAX_SPEED_HZ = ior(SPI_IOC_MAGIC, 4, 4)
SPI_IOC_WR_MAX_SPEED_HZ = iow(SPI_IOC_MAGIC, 4, 4)
SPI_IOC_WR_MODE32 = iow(SPI_IOC_MAGIC, 5, 4)


def spi_ioc_message(count: int) -> int:
    """``SPI_IOC_MESSAGE(count)``; the kernel's macro yields size 0 (an invalid request) past 14 bits."""
    size = count * TRANSFER.size
    if count < 1 or size >= 1 << _IOC_SIZEBITS:
        raise ValueError(f"SPI_IOC_MESSAGE({count}) does not fit in one ioctl")
    return iow(SPI_IOC_MAGIC, 0, size)


def pack_transfer(tx_address: int, rx_address: int, length: int, speed_hz: int, bits_per_word: int,
                  cs_change: bool = False, delay_usecs: int = 0) -> bytes:
    """One ``struct spi_ioc_transfer`` (addresses are user-space pointers; 0 = no buffer)."""
    return TRANSFER.pack(tx_address, rx_address, length, speed_hz, delay_usecs, bits_per_word,
                         int(cs_change), 0, 0, 0, 0)


def read_bufsiz(path: Path = BUFSIZ_PATH) -> int:
    """The spidev module's ``bufsiz`` (largest message in bytes); 4096 when unreadable."""
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError):
        return DEFAULT_BUFSIZ
    return value if value > 0 else DEFAULT_BUFSIZ


Ioctl = Callable[[int, int, Any], Any]


class SpiDevice:
    """``/dev/spidev<bus>.<device>`` driven by ioctls.

    ``opener``, ``ioctl``, ``closer`` and ``bufsiz`` are seams for tests (a fake file descriptor);
    the defaults are ``os.open``, ``fcntl.ioctl``, ``os.close`` and :func:`read_bufsiz`.
    """

    def __init__(self, bus: int = 0, device: int = 0, *, dev_dir: str | Path = "/dev", bufsiz: int | None = None,
                 opener: Callable[[str, int], int] = os.open, ioctl: Ioctl = fcntl.ioctl,
                 closer: Callable[[int], None] = os.close) -> None:
        self.path = str(Path(dev_dir) / f"spidev{bus}.{device}")
        self.bufsiz = bufsiz if bufsiz is not None else read_bufsiz()
        self._opener, self._ioctl, self._closer = opener, ioctl, closer
        self.fd: int | None = None
        self.mode, self.bits_per_word, self.speed_hz = 0, 8, 500_000

    def open(self) -> SpiDevice:
        """Open the device file; OSError (FileNotFoundError, PermissionError) propagates to the caller."""
        self.fd = self._opener(self.path, os.O_RDWR)
        return self

    def _require_open(self) -> int:
        if self.fd is None:
            raise OSError(f"{self.path} is not open")
        return self.fd

    def set_mode(self, mode: int) -> None:
        """SPI mode bits (CPOL/CPHA 0-3, plus flags such as ``SPI_NO_CS``)."""
        fd = self._require_open()
        if mode <= 0xFF:
            self._ioctl(fd, SPI_IOC_WR_MODE, struct.pack("=B", mode))
        else:
            self._ioctl(fd, SPI_IOC_WR_MODE32, struct.pack("=I", mode))
        self.mode = mode

    def set_bits_per_word(self, bits: int) -> None:
        self._ioctl(self._require_open(), SPI_IOC_WR_BITS_PER_WORD, struct.pack("=B", bits))
        self.bits_per_word = bits

    def set_speed_hz(self, speed_hz: int) -> None:
        self._ioctl(self._require_open(), SPI_IOC_WR_MAX_SPEED_HZ, struct.pack("=I", speed_hz))
        self.speed_hz = speed_hz

    def configure(self, mode: int = 0, bits_per_word: int = 8, speed_hz: int = 4_000_000) -> SpiDevice:
        self.set_mode(mode)
        self.set_bits_per_word(bits_per_word)
        self.set_speed_hz(speed_hz)
        return self

    def _message(self, chunk: bytes | bytearray | memoryview, read: bool) -> bytes:
        """One SPI_IOC_MESSAGE(1) carrying ``chunk``; returns what was clocked in when ``read``."""
        fd = self._require_open()
        length = len(chunk)
        tx = ctypes.create_string_buffer(bytes(chunk), length)
        rx = ctypes.create_string_buffer(length) if read else None
        record = bytearray(pack_transfer(ctypes.addressof(tx), ctypes.addressof(rx) if rx is not None else 0,
                                         length, self.speed_hz, self.bits_per_word))
        self._ioctl(fd, spi_ioc_message(1), record)  # tx/rx stay alive until the ioctl returns
        return rx.raw if rx is not None else b""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send ``data``, one transfer per ``bufsiz`` bytes (chip select is released between them)."""
        view = memoryview(data).cast("B")
        for start in range(0, len(view), self.bufsiz):
            self._message(view[start:start + self.bufsiz], read=False)

    def transfer(self, data: bytes | bytearray | memoryview) -> bytes:
        """Full duplex: send ``data`` and return the bytes received at the same time."""
        view = memoryview(data).cast("B")
        return b"".join(self._message(view[start:start + self.bufsiz], read=True)
                        for start in range(0, len(view), self.bufsiz))

    def close(self) -> None:
        """Close the file descriptor; safe to call twice."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            self._closer(fd)
