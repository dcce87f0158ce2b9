"""Ports for tests that must name one before anything listens on it (a daemon's ``web.listen``, a
server that is not there).

A port from ``bind(("127.0.0.1", 0))`` is free only until it is released: it lies in the kernel's
ephemeral range, so under ``pytest -n 2`` the other worker's next server on port 0 or outgoing
connection can take it before the daemon binds it (a flaky "address in use", or a "refused" test that
reaches a server). These ports come from below the ephemeral range (Linux: 32768-60999), where the
kernel never hands one out by itself, from a block of its own for each xdist worker, and each is
checked free (no listener, no connection in TIME_WAIT) before it is given out.
"""

from __future__ import annotations

import itertools
import os
import socket

FIRST_PORT = 20000  # below Linux's ephemeral range and the Pi twin's fixed 18080
BLOCK = 3000  # ports per xdist worker: gw0 20000-22999, gw1 23000-25999, ... (no xdist: the last block)
BLOCKS = 4


def _block() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) % (BLOCKS - 1) if worker.startswith("gw") and worker[2:].isdigit() else BLOCKS - 1


_BASE = FIRST_PORT + BLOCK * _block()
_OFFSET = os.getpid() % BLOCK  # a new run does not start where the last one did (TIME_WAIT)
_CANDIDATES = (_BASE + (_OFFSET + i) % BLOCK for i in itertools.count())


def free_port() -> int:
    """A port on 127.0.0.1 that nothing uses now and that no other test process will be given."""
    for port in itertools.islice(_CANDIDATES, BLOCK):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {_BASE}-{_BASE + BLOCK - 1}: every one is bound or in TIME_WAIT")
