"""A recording fake bus and a fake clock for driver tests (no sys.modules tricks, no hardware).

The bus records the protocol as ("cmd", code) / ("data", bytes) / ("pin", pin, value) events and
models the panel's BUSY line: after selected commands the line reads busy for a few polls. Faults:
``stuck`` (BUSY never releases), ``stuck-refresh`` (BUSY never releases after the refresh command)
and ``dead`` (BUSY never goes busy, as with no panel attached).
"""

from __future__ import annotations

from frame.display.drivers.base import Pins

PINS = Pins()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


class FakeBus:
    """Records everything; BUSY (active low) reads busy for ``busy_polls`` reads after busy commands."""

    def __init__(self, busy_commands: set[int], busy_polls: int = 3, fault: str | None = None,
                 status_poll: int | None = None) -> None:
        self.busy_commands, self.busy_polls, self.fault = busy_commands, busy_polls, fault
        self.status_poll = status_poll
        self.events: list[tuple] = []
        self.pins: dict[int, int] = {}
        self._remaining = 0
        self._dc = None
        self._refreshing = False
        self.closed = False

    def write_pin(self, pin: int, value: int) -> None:
        if self.closed:
            raise AssertionError("bus used after close")
        self.pins[pin] = value
        if pin == PINS.dc:
            self._dc = value
        else:
            self.events.append(("pin", pin, value))

    def read_pin(self, pin: int) -> int:
        assert pin == PINS.busy, f"read of unexpected pin {pin}"
        if self.fault == "stuck":
            return 0
        if self.fault == "dead":
            return 1
        if self.fault == "stuck-refresh" and self._refreshing:
            return 0
        if self._remaining > 0:
            self._remaining -= 1
            return 0
        return 1

    def spi_write(self, data: bytes) -> None:
        assert self._dc in (0, 1), "DC must be set before every SPI transfer"
        assert isinstance(data, bytes)
        if self._dc == 0:
            assert len(data) == 1, "a command is one byte"
            code = data[0]
            if code == self.status_poll:
                return  # status reads accompany BUSY polls; their number depends on timing
            self.events.append(("cmd", code))
            self._refreshing = code == 0x12
            if code in self.busy_commands:
                self._remaining = self.busy_polls
        else:
            assert self.events and self.events[-1][0] in ("cmd", "data"), "data before any command"
            if self.events[-1][0] == "data":
                self.events[-1] = ("data", self.events[-1][1] + data)
            else:
                self.events.append(("data", data))

    def close(self) -> None:
        self.closed = True

    # ----- helpers for assertions --------------------------------------------------------------------
    def protocol(self) -> list[tuple]:
        """Commands with their data joined: [(code, bytes), ...]; pin events as ("pin", pin, v)."""
        out: list[tuple] = []
        for event in self.events:
            if event[0] == "cmd":
                out.append((event[1], b""))
            elif event[0] == "data":
                out[-1] = (out[-1][0], out[-1][1] + event[1])
            else:
                out.append(event)
        return out

    def commands(self) -> list[tuple[int, bytes]]:
        return [e for e in self.protocol() if e[0] != "pin"]
