"""The Waveshare 7.3in 4-bpp panels (800x480): (E) Spectra 6 and (F) 7-colour ACeP.

Both controllers take the same reset, one frame write and the same power-on / refresh / power-off
cycle (``Waveshare4bppDriver``); each model is its register table, with values from Waveshare's
published epd7in3e and epd7in3f init sequences. Another panel of this family is one more table and
class here (and its row in ``frame.config.panels``).

(E) Spectra 6: codes 0 black, 1 white, 2 yellow, 3 red, 5 blue, 6 green; code 4 unused.
(F) ACeP: codes 0 black, 1 white, 2 green, 3 blue, 4 red, 5 yellow, 6 orange.
"""

from __future__ import annotations

import numpy as np

from frame.display.drivers.base import WaveshareDriver, pack_4bpp
from frame.display.drivers.registry import register_driver

# Register names from the controllers' datasheet (one register map for both).
CMDH, PSR, PWR, POF, POFS, PON, BTST1, BTST2, DSLP, BTST3, DTM, DRF, IPC = (
    0xAA, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x10, 0x12, 0x13)
PLL, TSE, CDI, TCON, TRES, VDCS, T_VDCS, AGID, CCSET, PWS, TSSET = (
    0x30, 0x41, 0x50, 0x60, 0x61, 0x82, 0x84, 0x86, 0xE0, 0xE3, 0xE6)


class Waveshare4bppDriver(WaveshareDriver):
    """The Waveshare 7.3in 4-bpp controllers (ACeP F, Spectra 6 E): after the reset the same write of
    a per-model register table (``init_table``, from Waveshare's published init sequence), one frame
    write (DTM 0x10) and the same power-on, refresh, power-off cycle (PON 0x04, DRF 0x12, POF 0x02)."""

    init_table: tuple[tuple[int, bytes], ...] = ()
    power_on_after_init = False  # the Spectra 6 (E) sequence powers on once its registers are set

    def init_registers(self) -> None:
        self.wait_idle("reset")
        self.clock.sleep(0.03)
        for code, data in self.init_table:
            self.command(code, data)
        if self.power_on_after_init:
            self.command(PON)
            self.wait_idle("power on")

    def frame_commands(self, indices: np.ndarray) -> list[tuple[int, bytes]]:
        return [(DTM, pack_4bpp(indices, self.panel.native_indices))]

    def refresh(self) -> None:
        self.command(PON)
        self.wait_idle("power on")
        self.command(DRF, b"\x00")
        self.wait_refresh("display refresh")
        self.command(POF, b"\x00")
        self.wait_idle("power off")


INIT_7IN3E = (
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

INIT_7IN3F = (
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


@register_driver("waveshare_7in3e")
class Waveshare7in3E(Waveshare4bppDriver):
    init_table = INIT_7IN3E
    power_on_after_init = True


@register_driver("waveshare_7in3f")
class Waveshare7in3F(Waveshare4bppDriver):
    init_table = INIT_7IN3F
