"""Waveshare 7.3in (E) Spectra 6 (800x480, 4 bpp; codes 0 black, 1 white, 2 yellow, 3 red, 5 blue,
6 green; code 4 unused). Register values follow Waveshare's published epd7in3e init sequence."""

from __future__ import annotations

from frame.display.drivers.base import Waveshare4bppDriver
from frame.display.drivers.registry import register_driver

# Register names from the controller datasheet.
CMDH, PSR, PWR, POF, POFS, PON, BTST1, BTST2, DSLP, BTST3, DTM, DRF = (
    0xAA, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x10, 0x12)
PLL, CDI, TCON, TRES, T_VDCS, PWS = 0x30, 0x50, 0x60, 0x61, 0x84, 0xE3

INIT = (
    (CMDH, b"\x49\x55\x20\x08\x09\x18"),
    (PWR, b"\x3f"),
    (PSR, b"\x5f\x69"),
    (POFS, b"\x00\x54\x00\x44"),
    (BTST1, b"\x40\x1f\x1f\x2c"),
    (BTST2, b"\x6f\x1f\x17\x49"),
    (BTST3, b"\x6f\x1f\x1f\x22"),
    (PLL, b"\x03"),
    (CDI, b"\x3f"),
    (TCON, b"\x02\x00"),
    (TRES, b"\x03\x20\x01\xe0"),  # 800 x 480
    (T_VDCS, b"\x01"),
    (PWS, b"\x2f"),
)


@register_driver("waveshare_7in3e")
class Waveshare7in3E(Waveshare4bppDriver):
    init_table = INIT
    power_on_after_init = True
