"""Exact command/data streams of the Waveshare drivers, packing, BUSY deadlines and fault recovery."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from frame.config.panels import get_panel
from frame.display.drivers.base import PanelError, PanelNotResponding, PanelTimeout, pack_1bpp, pack_4bpp
from frame.display.drivers.waveshare_7in3 import Waveshare7in3E, Waveshare7in3F
from frame.display.drivers.waveshare_7in5_v2 import Waveshare7in5V2
from tests.display.fakes import PINS, FakeBus, FakeClock

RESET = [("pin", PINS.power, 1), ("pin", PINS.reset, 1), ("pin", PINS.reset, 0), ("pin", PINS.reset, 1)]
# Values below are typed in from Waveshare's reference drivers, not imported from ours.
INIT_7IN3E = [
    (0xAA, bytes.fromhex("495520080918")), (0x01, bytes.fromhex("3f")), (0x00, bytes.fromhex("5f69")),
    (0x03, bytes.fromhex("00540044")), (0x05, bytes.fromhex("401f1f2c")), (0x06, bytes.fromhex("6f1f1749")),
    (0x08, bytes.fromhex("6f1f1f22")), (0x30, bytes.fromhex("03")), (0x50, bytes.fromhex("3f")),
    (0x60, bytes.fromhex("0200")), (0x61, bytes.fromhex("032001e0")), (0x84, bytes.fromhex("01")),
    (0xE3, bytes.fromhex("2f")), (0x04, b""),
]
INIT_7IN3F = [
    (0xAA, bytes.fromhex("495520080918")), (0x01, bytes.fromhex("3f00322a0e2a")),
    (0x00, bytes.fromhex("5f69")), (0x03, bytes.fromhex("00540044")), (0x05, bytes.fromhex("401f1f2c")),
    (0x06, bytes.fromhex("6f1f1f22")), (0x08, bytes.fromhex("6f1f1f22")), (0x13, bytes.fromhex("0004")),
    (0x30, bytes.fromhex("3c")), (0x41, bytes.fromhex("00")), (0x50, bytes.fromhex("3f")),
    (0x60, bytes.fromhex("0200")), (0x61, bytes.fromhex("032001e0")), (0x82, bytes.fromhex("1e")),
    (0x84, bytes.fromhex("00")), (0x86, bytes.fromhex("00")), (0xE3, bytes.fromhex("2f")),
    (0xE0, bytes.fromhex("00")), (0xE6, bytes.fromhex("00")),
]
INIT_7IN5_V2 = [
    (0x06, bytes.fromhex("17172817")), (0x01, bytes.fromhex("07073f3f")), (0x04, b""),
    (0x00, bytes.fromhex("1f")), (0x61, bytes.fromhex("032001e0")), (0x15, bytes.fromhex("00")),
    (0x50, bytes.fromhex("1007")), (0x60, bytes.fromhex("22")),
]
REFRESH_COLOUR = [(0x04, b""), (0x12, b"\x00"), (0x02, b"\x00"), (0x07, b"\xa5")]
REFRESH_BW = [(0x12, b""), (0x02, b""), (0x07, b"\xa5")]
BUSY = {0x04, 0x12, 0x02}


def _pattern(panel, cycle: list[int]) -> Image.Image:
    width, height = panel.size
    row = np.resize(np.array(cycle, dtype=np.uint8), width)
    return Image.fromarray(np.tile(row, (height, 1)), mode="P")


def _driver(cls, name, **bus_kwargs):
    bus = FakeBus(BUSY, status_poll=cls.status_poll, **bus_kwargs)
    clock = FakeClock()
    return cls(get_panel(name), bus, clock=clock, busy_timeout=120.0), bus, clock


def test_7in3e_stream_is_reset_init_frame_refresh_sleep() -> None:
    driver, bus, _ = _driver(Waveshare7in3E, "waveshare-7in3e")
    driver.show(_pattern(driver.panel, [0, 1, 2, 3, 4, 5]))
    protocol = bus.protocol()
    assert protocol[:4] == RESET
    commands = [e for e in protocol[4:]]
    assert commands[:len(INIT_7IN3E)] == INIT_7IN3E
    frame_cmd, frame = commands[len(INIT_7IN3E)]
    assert frame_cmd == 0x10 and len(frame) == 800 * 480 // 2
    # Palette positions 0..5 go out as native codes 0,1,2,3,5,6 (code 4 is never sent).
    assert frame[:3] == bytes([0x01, 0x23, 0x56])
    assert 0x4 not in {b >> 4 for b in frame} | {b & 0xF for b in frame}
    assert commands[len(INIT_7IN3E) + 1:] == REFRESH_COLOUR


def test_7in3f_stream_and_native_codes() -> None:
    driver, bus, _ = _driver(Waveshare7in3F, "waveshare-7in3f")
    driver.show(_pattern(driver.panel, [0, 1, 2, 3, 4, 5, 6, 6]))
    protocol = bus.protocol()
    assert protocol[:4] == RESET
    assert protocol[4:4 + len(INIT_7IN3F)] == INIT_7IN3F
    frame_cmd, frame = protocol[4 + len(INIT_7IN3F)]
    assert frame_cmd == 0x10 and len(frame) == 192_000
    assert frame[:4] == bytes([0x01, 0x23, 0x45, 0x66])
    assert protocol[5 + len(INIT_7IN3F):] == REFRESH_COLOUR


def test_7in5_v2_stream_sends_inverse_old_frame_and_one_bit_new_frame() -> None:
    driver, bus, _ = _driver(Waveshare7in5V2, "waveshare-7in5-v2")
    assert Waveshare7in5V2.status_poll == 0x71
    driver.show(_pattern(driver.panel, [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]))
    protocol = bus.protocol()
    assert protocol[:4] == RESET
    assert protocol[4:4 + len(INIT_7IN5_V2)] == INIT_7IN5_V2
    (old_cmd, old), (new_cmd, new) = protocol[4 + len(INIT_7IN5_V2):6 + len(INIT_7IN5_V2)]
    assert (old_cmd, new_cmd) == (0x10, 0x13)
    assert len(new) == len(old) == 800 * 480 // 8
    assert new[:2] == bytes([0x80, 0x01])  # black (palette 0) is bit 1, leftmost pixel in the MSB
    assert old[:2] == bytes([0x7F, 0xFE])
    assert protocol[6 + len(INIT_7IN5_V2):] == REFRESH_BW


def test_packing_helpers() -> None:
    indices = np.array([[0, 1, 2, 3], [5, 4, 3, 2]], dtype=np.uint8)
    assert pack_4bpp(indices, (0, 1, 2, 3, 5, 6)) == bytes([0x01, 0x23, 0x65, 0x32])
    bits = np.array([[0, 1, 0, 1, 0, 1, 0, 1]], dtype=np.uint8)
    assert pack_1bpp(bits, (1, 0)) == bytes([0xAA])


@pytest.mark.parametrize("cls,name", [(Waveshare7in3E, "waveshare-7in3e"), (Waveshare7in3F, "waveshare-7in3f"),
                                      (Waveshare7in5V2, "waveshare-7in5-v2")])
def test_busy_stuck_times_out_and_next_show_starts_clean(cls, name) -> None:
    driver, bus, clock = _driver(cls, name, fault="stuck")
    start = clock.now
    with pytest.raises(PanelTimeout) as err:
        driver.show(_pattern(driver.panel, [1]))
    assert 10 <= clock.now - start < 12  # a short step fails fast, not after the refresh deadline
    message = str(err.value)
    assert "still busy" in message and "dtparam=spi=on" in message and "HAT" in message
    assert bus.pins[PINS.reset] == 0 and bus.pins[PINS.power] == 0  # held in reset, supply off

    bus.fault, bus.events = None, []
    driver.show(_pattern(driver.panel, [1]))
    protocol = bus.protocol()
    assert protocol[:4] == RESET  # a fresh reset and full init, not a continuation
    assert protocol[-1] == (0x07, b"\xa5")


@pytest.mark.parametrize("cls,name", [(Waveshare7in3E, "waveshare-7in3e"), (Waveshare7in3F, "waveshare-7in3f"),
                                      (Waveshare7in5V2, "waveshare-7in5-v2")])
def test_refresh_that_never_finishes_times_out_at_the_configured_deadline(cls, name) -> None:
    driver, bus, clock = _driver(cls, name, fault="stuck-refresh")
    start = clock.now
    with pytest.raises(PanelTimeout, match="still busy 120 s after display refresh"):
        driver.show(_pattern(driver.panel, [1]))
    assert 120 <= clock.now - start < 125
    assert bus.pins[PINS.reset] == 0


@pytest.mark.parametrize("cls,name", [(Waveshare7in3E, "waveshare-7in3e"), (Waveshare7in3F, "waveshare-7in3f"),
                                      (Waveshare7in5V2, "waveshare-7in5-v2")])
def test_never_busy_is_reported_as_not_responding(cls, name) -> None:
    driver, bus, clock = _driver(cls, name, fault="dead")
    with pytest.raises(PanelNotResponding, match="never went busy after display refresh.*wiring"):
        driver.show(_pattern(driver.panel, [1]))
    assert clock.now - 1000.0 < 10  # gave up after the short start window, not the 120 s deadline
    assert not any(code == 0x07 for code, *_ in bus.commands())  # no sleep command to a dead panel


def test_close_always_releases_bus_and_powers_off() -> None:
    driver, bus, _ = _driver(Waveshare7in3E, "waveshare-7in3e", fault="stuck")
    with pytest.raises(PanelTimeout):
        with driver:
            driver.show(_pattern(driver.panel, [1]))
    assert bus.closed and bus.pins[PINS.power] == 0
    driver.close()  # twice is fine
    with pytest.raises(PanelError, match="closed"):
        driver.show(_pattern(driver.panel, [1]))


def test_wrong_picture_size_is_refused_before_touching_the_panel() -> None:
    driver, bus, _ = _driver(Waveshare7in3E, "waveshare-7in3e")
    with pytest.raises(PanelError, match="panel is 800x480"):
        driver.show(Image.new("P", (480, 800)))
    assert bus.events == []


def test_clear_sends_white_everywhere() -> None:
    driver, bus, _ = _driver(Waveshare7in3E, "waveshare-7in3e")
    driver.clear()
    frame = dict(bus.commands())[0x10]
    assert frame == bytes([0x11]) * 192_000
