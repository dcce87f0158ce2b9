"""Waveshare 7.5in V2 black/white (800x480, 1 bpp, bit 1 = black in the new-data RAM).

The controller compares old (DTM1) and new (DTM2) frames; for a full refresh we send the inverse of
the new frame as "old", as Waveshare's current epd7in5_V2 driver does. BUSY is polled after a status
read (GET_STATUS 0x71). Register values follow that driver's OTP-waveform init."""

from __future__ import annotations

import numpy as np

from frame.display.drivers.base import WaveshareDriver, pack_1bpp
from frame.display.drivers.registry import register_driver

PSR, PWR, POF, PON, BTST, DSLP, DTM1, DRF, DTM2, DUSPI, CDI, TCON, TRES, FLG = (
    0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x10, 0x12, 0x13, 0x15, 0x50, 0x60, 0x61, 0x71)

BOOSTER = (BTST, b"\x17\x17\x28\x17")
POWER = (PWR, b"\x07\x07\x3f\x3f")  # VGH 20 V, VGL -20 V, VDH 15 V, VDL -15 V
PANEL = (
    (PSR, b"\x1f"),  # KW mode, waveform from OTP
    (TRES, b"\x03\x20\x01\xe0"),  # 800 x 480
    (DUSPI, b"\x00"),
    (CDI, b"\x10\x07"),
    (TCON, b"\x22"),
)


@register_driver("waveshare_7in5_v2")
class Waveshare7in5V2(WaveshareDriver):
    status_poll = FLG

    def init_registers(self) -> None:
        self.command(*BOOSTER)
        self.command(*POWER)
        self.command(PON)
        self.clock.sleep(0.1)
        self.wait_idle("power on")
        for code, data in PANEL:
            self.command(code, data)

    def frame_commands(self, indices: np.ndarray) -> list[tuple[int, bytes]]:
        new = pack_1bpp(indices, self.panel.native_indices)
        old = (np.frombuffer(new, dtype=np.uint8) ^ 0xFF).tobytes()
        return [(DTM1, old), (DTM2, new)]

    def refresh(self) -> None:
        self.command(DRF)
        self.clock.sleep(0.1)
        self.wait_refresh("display refresh")

    def sleep(self) -> None:
        self.command(POF)
        self.wait_idle("power off")
        super().sleep()

