"""The ioctl SPI device: request numbers and struct layout against the kernel header, chunking at bufsiz.

``FakeSpiFd`` plays the kernel's spidev: it decodes each ``spi_ioc_transfer`` it is handed, reads the
bytes at ``tx_buf`` straight from memory, writes a reply at ``rx_buf``, and refuses messages larger
than ``bufsiz`` with EMSGSIZE, as ``drivers/spi/spidev.c`` does.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import struct
import subprocess

import pytest

from frame.display import spi
from frame.display.spi import TRANSFER, SpiDevice, read_bufsiz, spi_ioc_message

HEADER = "/usr/include/linux/spi/spidev.h"
FIELDS = ("tx_buf", "rx_buf", "len", "speed_hz", "delay_usecs", "bits_per_word", "cs_change", "tx_nbits",
          "rx_nbits", "word_delay_usecs", "pad")
REQUESTS = ("SPI_IOC_RD_MODE", "SPI_IOC_WR_MODE", "SPI_IOC_RD_BITS_PER_WORD", "SPI_IOC_WR_BITS_PER_WORD",
            "SPI_IOC_RD_MAX_SPEED_HZ", "SPI_IOC_WR_MAX_SPEED_HZ", "SPI_IOC_WR_MODE32")


class FakeSpiFd:
    """A spidev file descriptor: records settings and messages, answers each tx byte with its complement."""

    def __init__(self, bufsiz: int = 4096) -> None:
        self.bufsiz, self.fd, self.closed = bufsiz, None, False
        self.settings: list[tuple[int, bytes]] = []
        self.messages: list[list[dict]] = []  # per ioctl, its decoded transfers (+ "data" read at tx_buf)

    def open(self, path: str, flags: int) -> int:
        assert flags & os.O_RDWR
        self.path, self.fd = path, 17
        return self.fd

    def ioctl(self, fd: int, request: int, arg: bytes | bytearray) -> int:
        assert fd == self.fd and not self.closed
        size = (request >> 16) & 0x3FFF
        assert len(arg) == size, "the request's size field must match the argument"
        if request & 0xFF == 0:  # SPI_IOC_MESSAGE(n)
            assert size % TRANSFER.size == 0
            transfers = [dict(zip(FIELDS, TRANSFER.unpack_from(arg, offset)))
                         for offset in range(0, size, TRANSFER.size)]
            if sum(t["len"] for t in transfers) > self.bufsiz:
                raise OSError(errno.EMSGSIZE, "Message too long")
            for t in transfers:
                t["data"] = ctypes.string_at(t["tx_buf"], t["len"]) if t["tx_buf"] else None
                if t["rx_buf"]:
                    ctypes.memmove(t["rx_buf"], bytes(255 - b for b in t["data"]), t["len"])
            self.messages.append(transfers)
            return sum(t["len"] for t in transfers)
        self.settings.append((request, bytes(arg)))
        return 0

    def close(self, fd: int) -> None:
        assert fd == self.fd
        self.closed = True


def _device(fake: FakeSpiFd, bus: int = 0, device: int = 0) -> SpiDevice:
    return SpiDevice(bus, device, bufsiz=fake.bufsiz, opener=fake.open, ioctl=fake.ioctl, closer=fake.close)


def test_request_numbers_follow_the_ioc_encoding() -> None:
    # _IOC(dir, 'k', nr, size) = dir << 30 | size << 16 | 0x6b << 8 | nr, worked out by hand
    assert spi.SPI_IOC_WR_MODE == (1 << 30) | (1 << 16) | (0x6B << 8) | 1 == 0x40016B01
    assert spi.SPI_IOC_RD_MODE == 0x80016B01
    assert spi.SPI_IOC_WR_BITS_PER_WORD == 0x40016B03
    assert spi.SPI_IOC_WR_MAX_SPEED_HZ == 0x40046B04
    assert spi.SPI_IOC_WR_MODE32 == 0x40046B05
    assert spi_ioc_message(1) == 0x40206B00 and spi_ioc_message(2) == 0x40406B00
    assert spi_ioc_message(511) == (1 << 30) | (511 * 32 << 16) | 0x6B00
    with pytest.raises(ValueError, match="does not fit"):
        spi_ioc_message(512)  # 512 * 32 = 1 << 14: the kernel's SPI_MSGSIZE would be 0


def test_transfer_struct_matches_a_c_compiler_s_layout_via_ctypes() -> None:
    class Transfer(ctypes.Structure):
        _fields_ = [("tx_buf", ctypes.c_uint64), ("rx_buf", ctypes.c_uint64), ("len", ctypes.c_uint32),
                    ("speed_hz", ctypes.c_uint32), ("delay_usecs", ctypes.c_uint16)] + [
                   (name, ctypes.c_uint8) for name in FIELDS[5:]]

    assert ctypes.sizeof(Transfer) == TRANSFER.size == 32
    packed = spi.pack_transfer(0x1122334455667788, 0x99AABBCCDDEEFF00, 4096, 4_000_000, 8, cs_change=True,
                               delay_usecs=3)
    record = Transfer.from_buffer_copy(packed)
    assert (record.tx_buf, record.rx_buf, record.len, record.speed_hz, record.delay_usecs, record.bits_per_word,
            record.cs_change, record.pad) == (0x1122334455667788, 0x99AABBCCDDEEFF00, 4096, 4_000_000, 3, 8, 1, 0)


def test_request_numbers_and_layout_equal_the_kernel_header_compiled_by_gcc(tmp_path) -> None:
    """The real cross-check: the C compiler evaluates linux/spi/spidev.h's macros and offsetof()."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None or not os.path.exists(HEADER):
        pytest.skip("needs a C compiler and the Linux UAPI headers (linux-libc-dev)")
    lines = [f'printf("{name} %lu\\n", (unsigned long){name});' for name in REQUESTS]
    lines += [f'printf("MESSAGE{n} %lu\\n", (unsigned long)SPI_IOC_MESSAGE({n}));' for n in (1, 2, 7)]
    lines += [f'printf("offset_{f} %lu\\n", (unsigned long)offsetof(struct spi_ioc_transfer, {f}));' for f in FIELDS]
    lines += ['printf("sizeof %lu\\n", (unsigned long)sizeof(struct spi_ioc_transfer));']
    source = tmp_path / "spidev_values.c"
    source.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <linux/spi/spidev.h>\n"
                      "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    subprocess.run([gcc, str(source), "-o", str(tmp_path / "values")], check=True, capture_output=True)
    output = subprocess.run([str(tmp_path / "values")], check=True, capture_output=True, text=True).stdout
    values = {name: int(value) for name, value in (line.split() for line in output.splitlines())}

    for name in REQUESTS:
        assert getattr(spi, name) == values[name], name
    for n in (1, 2, 7):
        assert spi_ioc_message(n) == values[f"MESSAGE{n}"]
    formats = TRANSFER.format.lstrip("=")
    offsets = [struct.calcsize("=" + formats[:i]) for i in range(len(formats))]
    assert offsets == [values[f"offset_{f}"] for f in FIELDS]
    assert TRANSFER.size == values["sizeof"]


def test_open_configures_mode_bits_and_speed_in_that_order() -> None:
    fake = FakeSpiFd()
    device = _device(fake, 1, 2).open().configure(mode=3, bits_per_word=8, speed_hz=4_000_000)
    assert fake.path == "/dev/spidev1.2"
    assert fake.settings == [(spi.SPI_IOC_WR_MODE, b"\x03"), (spi.SPI_IOC_WR_BITS_PER_WORD, b"\x08"),
                             (spi.SPI_IOC_WR_MAX_SPEED_HZ, struct.pack("=I", 4_000_000))]
    device.set_mode(spi.SPI_NO_CS | 0x100)  # past 8 bits: the 32-bit request
    assert fake.settings[-1] == (spi.SPI_IOC_WR_MODE32, struct.pack("=I", 0x140))
    device.close()
    device.close()
    assert fake.closed and device.fd is None


@pytest.mark.parametrize("bufsiz", [4096, 1000])
def test_writes_are_split_at_bufsiz_and_carry_the_bytes(bufsiz: int) -> None:
    fake = FakeSpiFd(bufsiz)
    device = _device(fake).open().configure(speed_hz=2_000_000)
    data = bytes(range(256)) * 40  # 10240 bytes
    device.write(data)
    assert [len(m) for m in fake.messages] == [1] * -(-len(data) // bufsiz), "one transfer per ioctl"
    transfers = [m[0] for m in fake.messages]
    assert [t["len"] for t in transfers] == [min(bufsiz, len(data) - s) for s in range(0, len(data), bufsiz)]
    assert b"".join(t["data"] for t in transfers) == data
    assert {(t["speed_hz"], t["bits_per_word"], t["rx_buf"], t["cs_change"]) for t in transfers} == {
        (2_000_000, 8, 0, 0)}


def test_a_single_oversized_message_is_what_the_kernel_refuses() -> None:
    """Proves the fake enforces bufsiz, so the chunking test above could fail."""
    fake = FakeSpiFd(bufsiz=64)
    device = SpiDevice(bufsiz=128, opener=fake.open, ioctl=fake.ioctl, closer=fake.close).open()
    with pytest.raises(OSError) as caught:
        device.write(bytes(100))
    assert caught.value.errno == errno.EMSGSIZE


def test_full_duplex_transfer_returns_the_bytes_read() -> None:
    fake = FakeSpiFd(bufsiz=3)
    device = _device(fake).open()
    assert device.transfer(b"\x00\x01\x02\x03\xff") == b"\xff\xfe\xfd\xfc\x00"
    assert [m[0]["len"] for m in fake.messages] == [3, 2]


def test_using_a_closed_device_is_an_oserror() -> None:
    fake = FakeSpiFd()
    with pytest.raises(OSError, match="not open"):
        _device(fake).write(b"x")


def test_bufsiz_comes_from_the_spidev_module_parameter(tmp_path) -> None:
    parameter = tmp_path / "bufsiz"
    assert read_bufsiz(parameter) == 4096  # module not loaded: the kernel's default
    parameter.write_text("65536\n")
    assert read_bufsiz(parameter) == 65536
    parameter.write_text("garbage")
    assert read_bufsiz(parameter) == 4096
