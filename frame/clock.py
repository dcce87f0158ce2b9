"""The clock that waiting code takes: real time in the product, a fake one in tests.

The HTTP weight fetch's retry loop (``frame.engine.io.http_settings``) and a panel driver's busy wait
(``frame.display.bus``) both sleep and read a monotonic clock; tests inject a clock that does not
really sleep, so timeouts and back-offs fire instantly.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
