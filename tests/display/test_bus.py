"""The real SPI/GPIO bus, driven through fake spidev/gpiod/lgpio modules handed in by an importer,
and through the ioctl SPI device on a fake file descriptor when spidev is not installed."""

from __future__ import annotations

import enum
import types

import pytest

from frame.display import spi as spi_module
from frame.display.bus import BusError, SpiGpioBus
from frame.display.spi import SpiDevice
from tests.display.test_spi import FakeSpiFd

SPI_CHUNK = 4096


class FakeSpiDev:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail, self.chunks, self.closed, self.opened = fail, [], False, None
        self.max_speed_hz = self.mode = None

    def open(self, bus: int, device: int) -> None:
        if self.fail:
            raise self.fail
        self.opened = (bus, device)

    def writebytes2(self, data: bytes) -> None:
        self.chunks.append(bytes(data))

    def close(self) -> None:
        self.closed = True


class Value(enum.Enum):
    INACTIVE = 0
    ACTIVE = 1


class Direction(enum.Enum):
    INPUT = "in"
    OUTPUT = "out"


class FakeRequest:
    def __init__(self, config: dict) -> None:
        self.config, self.values, self.released = config, {}, False
        self.values = {pin: Value.ACTIVE for pin, s in config.items() if s["direction"] is Direction.INPUT}

    def set_value(self, pin: int, value: Value) -> None:
        assert self.config[pin]["direction"] is Direction.OUTPUT
        self.values[pin] = value

    def get_value(self, pin: int) -> Value:
        return self.values[pin]

    def release(self) -> None:
        self.released = True


def _modules(spi: FakeSpiDev | None, gpio_error: Exception | None = None, with_gpiod: bool = True):
    state = {}

    def request_lines(chip, consumer, config):
        if gpio_error:
            raise gpio_error
        state["request"] = FakeRequest(config)
        return state["request"]

    gpiod = types.SimpleNamespace(LineSettings=lambda **kw: kw, request_lines=request_lines)
    modules = {"spidev": types.SimpleNamespace(SpiDev=lambda: spi)} if spi is not None else {}
    if with_gpiod:
        modules.update({"gpiod": gpiod, "gpiod.line": types.SimpleNamespace(Direction=Direction, Value=Value)})

    def importer(name: str):
        if name not in modules:
            raise ModuleNotFoundError(name)
        return modules[name]
    return importer, state


def test_open_write_read_and_close_with_gpiod() -> None:
    spi = FakeSpiDev()
    importer, state = _modules(spi)
    bus = SpiGpioBus(outputs=(17, 25, 18), inputs=(24,), importer=importer, bufsiz=SPI_CHUNK).open()
    assert spi.opened == (0, 0) and spi.max_speed_hz == 4_000_000 and spi.mode == 0
    bus.spi_write(bytes(10_000))
    assert [len(c) for c in spi.chunks] == [SPI_CHUNK, SPI_CHUNK, 10_000 - 2 * SPI_CHUNK]
    bus.write_pin(17, 1)
    assert state["request"].values[17] is Value.ACTIVE
    assert bus.read_pin(24) == 1
    bus.close()
    bus.close()
    assert spi.closed and state["request"].released


def test_missing_spi_device_explains_and_claims_nothing() -> None:
    spi = FakeSpiDev(fail=FileNotFoundError("/dev/spidev0.0"))
    importer, state = _modules(spi)
    with pytest.raises(BusError, match=r"spidev0\.0.*dtparam=spi=on.*'spi' group"):
        SpiGpioBus(outputs=(17,), inputs=(24,), importer=importer).open()
    assert "request" not in state


def test_busy_gpio_lines_release_the_spi_device() -> None:
    spi = FakeSpiDev()
    importer, _ = _modules(spi, gpio_error=OSError("Device or resource busy"))
    with pytest.raises(BusError, match="another program.*'gpio' group"):
        SpiGpioBus(outputs=(17,), inputs=(24,), importer=importer).open()
    assert spi.closed


def test_without_gpiod_or_lgpio_the_hint_installs_into_the_python_running_frame() -> None:
    """The hint once said to apt-install python3-libgpiod or python3-lgpio, which the service's venv
    cannot see. It names this interpreter's pip and the 'pi' extra's wheel; SPI itself needs nothing."""
    import shlex
    import sys

    importer, _ = _modules(FakeSpiDev(), with_gpiod=False)
    with pytest.raises(BusError) as info:
        SpiGpioBus(outputs=(17,), inputs=(24,), importer=importer).open()
    message = str(info.value)
    assert f"{shlex.quote(sys.executable)} -m pip install 'gpiod>=2.0'" in message and "'pi' extra" in message
    assert "apt" not in message and "python3-" not in message and "spidev" not in message


def test_lgpio_fallback_when_gpiod_is_too_old() -> None:
    calls: list[tuple] = []

    class LgpioError(Exception):
        pass

    lgpio = types.SimpleNamespace(
        error=LgpioError, gpiochip_open=lambda chip: calls.append(("open", chip)) or 7,
        gpio_claim_output=lambda h, pin, level: calls.append(("out", pin, level)),
        gpio_claim_input=lambda h, pin: calls.append(("in", pin)),
        gpio_write=lambda h, pin, v: calls.append(("write", pin, v)),
        gpio_read=lambda h, pin: 0, gpiochip_close=lambda h: calls.append(("close", h)))
    spi = FakeSpiDev()
    base, _ = _modules(spi, with_gpiod=False)

    def importer(name: str):
        return lgpio if name == "lgpio" else base(name)

    bus = SpiGpioBus(outputs=(17, 25), inputs=(24,), importer=importer).open()
    bus.write_pin(25, 1)
    assert bus.read_pin(24) == 0
    bus.close()
    assert calls == [("open", 0), ("out", 17, 0), ("out", 25, 0), ("in", 24), ("write", 25, 1), ("close", 7)]
    assert spi.closed


def _ioctl_factory(fake: FakeSpiFd):
    return lambda bus, device: SpiDevice(bus, device, bufsiz=fake.bufsiz, opener=fake.open, ioctl=fake.ioctl,
                                         closer=fake.close)


def test_without_spidev_spi_goes_through_ioctls_on_the_device_file() -> None:
    fake = FakeSpiFd(bufsiz=4096)
    importer, state = _modules(None)
    bus = SpiGpioBus(outputs=(17, 25, 18), inputs=(24,), importer=importer, spi_factory=_ioctl_factory(fake),
                     speed_hz=4_000_000).open()
    assert fake.path == "/dev/spidev0.0"
    assert [request for request, _ in fake.settings] == [
        spi_module.SPI_IOC_WR_MODE, spi_module.SPI_IOC_WR_BITS_PER_WORD, spi_module.SPI_IOC_WR_MAX_SPEED_HZ]
    data = bytes(range(256)) * 40
    bus.spi_write(data)
    assert [m[0]["len"] for m in fake.messages] == [4096, 4096, 2048]
    assert b"".join(m[0]["data"] for m in fake.messages) == data
    bus.write_pin(17, 1)
    assert state["request"].values[17] is Value.ACTIVE
    bus.close()
    bus.close()
    assert fake.closed and state["request"].released


def test_bufsiz_defaults_to_the_running_kernel_s(monkeypatch) -> None:
    monkeypatch.setattr("frame.display.bus.read_bufsiz", lambda: 1234)
    assert SpiGpioBus(outputs=(), inputs=()).bufsiz == 1234


def test_ioctl_spi_without_permission_names_the_spi_group() -> None:
    def refuse(path: str, flags: int) -> int:
        raise PermissionError(13, "Permission denied", path)

    importer, state = _modules(None)
    factory = lambda bus, device: SpiDevice(bus, device, opener=refuse)  # noqa: E731
    with pytest.raises(BusError, match=r"spidev0\.0.*Permission denied.*'spi' group"):
        SpiGpioBus(outputs=(17,), inputs=(24,), importer=importer, spi_factory=factory).open()
    assert "request" not in state


def test_ioctl_spi_refusing_the_speed_closes_the_device() -> None:
    fake = FakeSpiFd()

    def ioctl(fd: int, request: int, arg: bytes) -> int:
        if request == spi_module.SPI_IOC_WR_MAX_SPEED_HZ:
            raise OSError(22, "Invalid argument")
        return fake.ioctl(fd, request, arg)

    importer, state = _modules(None)
    factory = lambda bus, device: SpiDevice(bus, device, opener=fake.open, ioctl=ioctl, closer=fake.close)  # noqa: E731
    with pytest.raises(BusError, match="Invalid argument"):
        SpiGpioBus(outputs=(17,), inputs=(24,), importer=importer, spi_factory=factory).open()
    assert fake.closed and "request" not in state
