"""Waveshare 7.3in (F) 7-colour ACeP (800x480, 4 bpp; codes 0 black, 1 white, 2 green, 3 blue, 4 red,
5 yellow, 6 orange). Register values follow Waveshare's published epd7in3f init sequence."""

from __future__ import annotations

from frame.display.drivers.base import Waveshare4bppDriver
from frame.display.drivers.registry import register_driver

CMDH, PSR, PWR, POF, POFS, PON, BTST1, BTST2, BTST3, IPC, DTM, DRF = (
    0xAA, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x13, 0x10, 0x12)
PLL, TSE, CDI, TCON, TRES, VDCS, T_VDCS, AGID, PWS, CCSET, TSSET = (
    0x30, 0x41, 0x50, 0x60, 0x61, 0x82, 0x84, 0x86, 0xE3, 0xE0, 0xE6)

INIT = (
    (CMDH, b"\x49\x55\x20\x08\x09\x18"),
    (PWR, b"\x3f\x00\x32\x2a\x0e\x2a"),
    (PSR, b"\x5f\x69"),
    (POFS, b"\x00\x54\x00\x44"),
    (BTST1, b"\x40\x1f\x1f\x2c"),
    (BTST2, b"\x6f\x1f\x1f\x22"),
    (BTST3, b"\x6f\x1f\x1f\x22"),
    (IPC, b"\x00\x04"),
    (PLL, b"\x3c"),
    (TSE, b"\x00"),
    (CDI, b"\x3f"),
    (TCON, b"\x02\x00"),
    (TRES, b"\x03\x20\x01\xe0"),  # 800 x 480
    (VDCS, b"\x1e"),
    (T_VDCS, b"\x00"),
    (AGID, b"\x00"),
    (PWS, b"\x2f"),
    (CCSET, b"\x00"),
    (TSSET, b"\x00"),
)


@register_driver("waveshare_7in3f")
class Waveshare7in3F(Waveshare4bppDriver):
    init_table = INIT
