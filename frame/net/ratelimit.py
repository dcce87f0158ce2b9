"""Guessing the owner token: failed attempts per client address, shared by every door that takes it.

The token can be tried through the phone page's login form and through the API's ``Authorization:
Bearer`` header. Both count into one ``FailureLimiter`` (the daemon's app creates it): ten failures
from one address within five minutes lock that address out of both for the rest of the window (429
with ``Retry-After``), so a short token cannot be guessed by switching doors. Other addresses are not
affected, and nothing is stored on disk (a restart forgets the counts).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

MAX_FAILURES = 10
FAILURE_WINDOW_SECONDS = 300.0
MAX_ADDRESSES = 1000


class FailureLimiter:
    """Counts failed token attempts per client address in a sliding window (thread-safe, in memory)."""

    def __init__(self, max_failures: int = MAX_FAILURES, window: float = FAILURE_WINDOW_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_failures
        self._window = window
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str) -> deque[float]:
        now = self._clock()
        times = self._failures.setdefault(address, deque())
        while times and now - times[0] > self._window:
            times.popleft()
        return times

    def blocked(self, address: str) -> bool:
        with self._lock:
            return len(self._recent(address)) >= self._max

    def retry_after(self, address: str) -> int:
        """Whole seconds until ``address`` may try again (0 when it may now)."""
        with self._lock:
            times = self._recent(address)
            if len(times) < self._max:
                return 0
            return max(1, math.ceil(times[-self._max] + self._window - self._clock()))

    def failed(self, address: str) -> None:
        with self._lock:
            self._recent(address).append(self._clock())
            if len(self._failures) > MAX_ADDRESSES:  # forget idle addresses: the table cannot grow unbounded
                for key in [k for k, v in self._failures.items() if not v]:
                    del self._failures[key]

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._failures.pop(address, None)
