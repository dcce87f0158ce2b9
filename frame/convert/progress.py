"""A byte-counting progress bar on stderr: redrawn in place on a terminal, a line per 10 % otherwise
(so a log file or ``journalctl`` gets a few lines, not thousands)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.0f} MB"


class ByteProgress:
    """``advance(nbytes)`` after each tensor; ``label`` names the file being converted."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.label = ""
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._last_decile = -1

    def advance(self, nbytes: int) -> None:
        self.done = min(self.total, self.done + nbytes)
        self._draw()

    def _line(self) -> str:
        fraction = self.done / self.total
        filled = int(fraction * self.width)
        elapsed = time.monotonic() - self.started
        eta = f", {elapsed / fraction * (1 - fraction):.0f} s left" if 0 < fraction < 1 and elapsed > 1 else ""
        return (f"converting [{'#' * filled}{'.' * (self.width - filled)}] {fraction:4.0%} "
                f"{_size(self.done)} of {_size(self.total)}{eta}  {self.label}")

    def _draw(self) -> None:
        now = time.monotonic()
        if self.tty:
            if now - self._last_draw >= 0.2 or self.done == self.total:
                self.stream.write("\r" + self._line().ljust(100)[:160])
                self.stream.flush()
                self._last_draw = now
            return
        decile = int(10 * self.done / self.total)
        if decile != self._last_decile:
            self._last_decile = decile
            self.stream.write(self._line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
