"""systemd's notify protocol (``sd_notify``) in a few lines: READY=1, WATCHDOG=1, STATUS=..., STOPPING=1.

A datagram to the socket named by ``$NOTIFY_SOCKET`` (an abstract socket when it starts with ``@``).
Outside systemd the variable is unset and every call is a no-op, so the daemon runs the same way in a
terminal, in tests and under ``Type=notify``.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


class Notifier:
    """Sends notify messages; ``enabled`` is False outside systemd."""

    def __init__(self, address: str | None = None) -> None:
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._socket: socket.socket | None = None
        if self._address:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            # never block the daemon on a busy reader: a full queue drops the message (status lines
            # are refreshed every few seconds anyway)
            self._socket.setblocking(False)

    @property
    def enabled(self) -> bool:
        return self._socket is not None

    def notify(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines (keys upper-cased); True when delivered."""
        if self._socket is None:
            return False
        message = "\n".join(f"{key.upper()}={value}" for key, value in fields.items())
        try:
            self._socket.sendto(message.encode("utf-8", "replace"), self._address)
        except OSError as exc:
            log.debug("sd_notify failed: %s", exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify(ready=1, status=status) if status else self.notify(ready=1)

    def watchdog(self) -> bool:
        return self.notify(watchdog=1)

    def status(self, text: str) -> bool:
        return self.notify(status=text.replace("\n", " ")[:200])

    def stopping(self) -> bool:
        return self.notify(stopping=1)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def watchdog_interval() -> float | None:
    """Half of ``WatchdogSec`` (from ``$WATCHDOG_USEC``) when the watchdog is on for this process."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or (pid.isdigit() and int(pid) != os.getpid()):
        return None
    return int(usec) / 2_000_000
