"""One daemon per state directory: an exclusive ``flock`` on ``<state_dir>/daemon.lock``, held for the
daemon's whole life.

Two daemons on one state directory would both "resume" the same render, write the same checkpoint
folder and mark each other's published renders failed. The second one must not start: it exits 1 with
a line naming the PID that holds the lock.

``flock`` (not a PID file alone) because the kernel drops the lock when its holder dies, however it
dies: a power cut, SIGKILL or the OOM killer never leave a stale lock behind. The file itself stays (it
only carries the holder's PID for the message); removing it while held would let a third daemon lock a
fresh file next to a running one. The descriptor is not inherited by worker processes (Python opens
files non-inheritable), so a render worker outliving its daemon does not keep the lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from frame.errors import FrameError

log = logging.getLogger(__name__)

LOCK_FILE = "daemon.lock"


class DaemonRunning(FrameError):
    """Another daemon holds the state directory's lock (exit code 1)."""


class StateDirLock:
    """The held lock; ``release()`` (or process exit) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, state_dir: str | Path) -> StateDirLock:
        """Take the lock of ``state_dir`` or raise DaemonRunning naming the holder's PID."""
        path = Path(state_dir) / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"PID {holder}" if holder else "another process"
            raise DaemonRunning(
                f"another frame daemon ({who}) is already running on {state_dir} (it holds {path}); "
                "only one may use a state directory: stop it first (sudo systemctl stop frame, or "
                f"kill {holder or 'it'})") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        log.debug("holding %s", path)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_pid(fd: int) -> int | None:
    """The PID the holder wrote (None while it has not written it yet, or if unreadable)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
