"""Which files and folders the code under test fsyncs, in order (``os.fsync`` wrapped; the paths are
read from /proc at the moment of the call). SQLite's own syncs happen in C and are not seen here; the
crash harness (tests/crash) records those."""

from __future__ import annotations

import os


def record_fsyncs(monkeypatch) -> list[str]:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        try:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            synced.append(f"fd {fd}")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced
