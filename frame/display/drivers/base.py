"""The one small interface every panel driver implements, plus the shared Waveshare plumbing.

A driver owns its hardware from ``init()`` to ``close()``; ``close()`` always releases it, even after a
fault. Every wait on the panel's BUSY line has a deadline, and a refresh must first *go* busy: a
panel that never does is not listening (cable, HAT, SPI), which the official loops would wait on forever.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from frame.clock import Clock, SystemClock
from frame.config.panels import Panel
from frame.display.bus import SPI_HINT, Bus, SpiGpioBus
from frame.errors import FrameError

log = logging.getLogger(__name__)

POLL_SECONDS = 0.01
STEP_SECONDS = 10.0  # deadline for reset / power on / power off (they take well under a second)
CHECKS = (f"check that the HAT is seated and the ribbon cable is in the right way round, the wiring "
          f"(RST 17, DC 25, CS 8, BUSY 24, PWR 18), and {SPI_HINT}")


class PanelError(FrameError):
    """The panel misbehaved; the next ``show`` starts again with a reset."""


class PanelTimeout(PanelError):
    """BUSY stayed active past its deadline."""


class PanelNotResponding(PanelError):
    """BUSY never went active after a command that must make the panel busy."""


@dataclass(frozen=True)
class OpenRequest:
    """What ``Driver.open`` may need besides the panel: display settings, the state folder, and the
    hardware or files tests put in place of the real ones."""

    out_dir: str = ""                  # display.out_dir (virtual panel; "" = <state_dir>/display)
    busy_timeout: float = 120.0        # display.busy_timeout_seconds (Waveshare panels)
    state_dir: Path | None = None
    bus: Bus | None = None             # Waveshare: the SPI + GPIO bus (None = the real one)
    clock: Clock | None = None
    inky_module: Any = None            # Inky: the inky library (None = import it)
    out_file: Path | None = None       # virtual panel: the PNG to write (the CLI's --out)


SPI_SPEED_HZ = 4_000_000


class Driver(abc.ABC):
    """init / show / clear / sleep / close, usable as a context manager."""

    def __init__(self, panel: Panel) -> None:
        self.panel = panel

    @classmethod
    @abc.abstractmethod
    def open(cls, panel: Panel, request: OpenRequest) -> Driver:
        """A driver for ``panel`` ready to show (``open_display`` calls this for the panel's driver id)."""

    @abc.abstractmethod
    def init(self) -> None:
        """Wake the panel and load its registers."""

    @abc.abstractmethod
    def show(self, prepared: Image.Image, original: Image.Image | None = None) -> list[str]:
        """Display a prepared "P" image (indices into the panel palette); returns files written, if any."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Fill the panel with white."""

    @abc.abstractmethod
    def sleep(self) -> None:
        """Put the panel into its lowest-power state."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the hardware. Must never raise for a panel that is already gone."""

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class Pins:
    """Waveshare e-Paper HAT wiring (BCM numbers)."""

    reset: int = 17
    dc: int = 25
    busy: int = 24
    power: int = 18


class WaveshareDriver(Driver):
    """Shared plumbing for the Waveshare UC81xx-family controllers (BUSY low = busy).

    Subclasses provide ``init_registers()``, ``frame_commands(indices)`` and ``refresh()``. Each ``show``
    runs reset -> init -> frame -> refresh -> power off -> deep sleep, so a fault in one show cannot
    leave the next one half-initialised.
    """

    status_poll: int | None = None  # command to send before each BUSY read (7.5in V2 wants 0x71)
    refresh_start_seconds = 2.0  # a refresh must make BUSY active within this

    def __init__(self, panel: Panel, bus: Bus, clock: Clock | None = None, busy_timeout: float = 120.0,
                 pins: Pins = Pins()) -> None:
        super().__init__(panel)
        self.bus, self.clock, self.busy_timeout, self.pins = bus, clock or SystemClock(), busy_timeout, pins
        self._closed = False

    @classmethod
    def open(cls, panel: Panel, request: OpenRequest) -> WaveshareDriver:
        pins = Pins()
        bus = request.bus
        if bus is None:
            bus = SpiGpioBus(outputs=(pins.reset, pins.dc, pins.power), inputs=(pins.busy,),
                             speed_hz=SPI_SPEED_HZ).open()
        return cls(panel, bus, clock=request.clock, busy_timeout=request.busy_timeout, pins=pins)

    # ----- protocol primitives ----------------------------------------------------------------------
    def command(self, code: int, data: bytes | bytearray | list[int] = b"") -> None:
        """A command byte with DC low, then its parameters with DC high."""
        self.bus.write_pin(self.pins.dc, 0)
        self.bus.spi_write(bytes([code]))
        if len(data):
            self.bus.write_pin(self.pins.dc, 1)
            self.bus.spi_write(bytes(data))

    def reset(self) -> None:
        self.bus.write_pin(self.pins.power, 1)
        for value, seconds in ((1, 0.02), (0, 0.002), (1, 0.02)):
            self.bus.write_pin(self.pins.reset, value)
            self.clock.sleep(seconds)

    def _busy(self) -> bool:
        if self.status_poll is not None:
            self.command(self.status_poll)
        return self.bus.read_pin(self.pins.busy) == 0

    def wait_idle(self, what: str, timeout: float = STEP_SECONDS) -> None:
        """Wait until BUSY is released, or raise ``PanelTimeout`` naming the step and what to check.

        Short steps get ``STEP_SECONDS`` so a stuck line is reported quickly; the refresh gets the
        configured ``busy_timeout`` (colour panels need 20-40 s).
        """
        deadline = self.clock.monotonic() + timeout
        while self._busy():
            if self.clock.monotonic() > deadline:
                raise PanelTimeout(f"{self.panel.name}: still busy {timeout:.0f} s after {what}; {CHECKS}")
            self.clock.sleep(POLL_SECONDS)

    def wait_refresh(self, what: str) -> None:
        """After a refresh command: BUSY must go active first (else nothing is listening), then idle."""
        deadline = self.clock.monotonic() + self.refresh_start_seconds
        while not self._busy():
            if self.clock.monotonic() > deadline:
                raise PanelNotResponding(f"{self.panel.name}: never went busy after {what}, so the panel is "
                                         f"not responding; {CHECKS}")
            self.clock.sleep(POLL_SECONDS)
        self.wait_idle(what, self.busy_timeout)

    # ----- the Driver interface ------------------------------------------------------------------------
    def init(self) -> None:
        self.reset()
        self.init_registers()

    def show(self, prepared: Image.Image, original: Image.Image | None = None) -> list[str]:
        indices = np.asarray(prepared, dtype=np.uint8)
        if indices.shape != (self.panel.size[1], self.panel.size[0]):
            raise PanelError(f"{self.panel.name}: picture is {indices.shape[1]}x{indices.shape[0]}, "
                             f"panel is {self.panel.size[0]}x{self.panel.size[1]}")
        if indices.max(initial=0) >= len(self.panel.native_indices):
            raise PanelError(f"{self.panel.name}: picture uses ink {int(indices.max())}, panel has "
                             f"{len(self.panel.native_indices)}")
        self._run(lambda: self._display(indices))
        return []

    def clear(self) -> None:
        width, height = self.panel.size
        self._run(lambda: self._display(np.full((height, width), self.panel.white_index, dtype=np.uint8)))

    def _run(self, action: Callable[[], None]) -> None:
        """init -> action -> deep sleep; on any fault, try to power the panel down and re-raise."""
        if self._closed:
            raise PanelError(f"{self.panel.name}: the display was closed; open it again")
        try:
            self.init()
            action()
            self.sleep()
        except Exception:
            log.warning("%s: fault during update; powering down so the next show starts clean", self.panel.name)
            self._safe_power_down()
            raise

    def _display(self, indices: np.ndarray) -> None:
        for code, data in self.frame_commands(indices):
            self.command(code, data)
        self.refresh()

    def _safe_power_down(self) -> None:
        try:
            self.bus.write_pin(self.pins.reset, 0)  # hold the controller in reset until the next init
            self.bus.write_pin(self.pins.power, 0)  # and cut the HAT's panel supply
        except Exception as exc:  # noqa: BLE001 - already handling a fault
            log.warning("could not power %s down: %s", self.panel.name, exc)

    def sleep(self) -> None:
        self.command(0x07, [0xA5])  # DSLP: deep sleep, needs a reset to wake
        self.clock.sleep(0.002)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.bus.write_pin(self.pins.power, 0)
        except Exception as exc:  # noqa: BLE001 - close must release the bus whatever happens
            log.warning("could not switch %s power off: %s", self.panel.name, exc)
        finally:
            self.bus.close()

    # ----- what each controller defines ----------------------------------------------------------------
    @abc.abstractmethod
    def init_registers(self) -> None: ...

    @abc.abstractmethod
    def frame_commands(self, indices: np.ndarray) -> list[tuple[int, bytes]]: ...

    @abc.abstractmethod
    def refresh(self) -> None: ...


def pack_4bpp(indices: np.ndarray, native: tuple[int, ...]) -> bytes:
    """Two pixels per byte, left pixel in the high nibble, palette positions mapped to native codes."""
    codes = np.asarray(native, dtype=np.uint8)[indices]
    return ((codes[:, 0::2] << 4) | codes[:, 1::2]).tobytes()


def pack_1bpp(indices: np.ndarray, native: tuple[int, ...]) -> bytes:
    """Eight pixels per byte, leftmost in the most significant bit, native bit per palette position."""
    bits = np.asarray(native, dtype=np.uint8)[indices]
    return np.packbits(bits, axis=1).tobytes()
