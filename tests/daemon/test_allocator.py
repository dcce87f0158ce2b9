"""``frame run`` sets glibc's allocator so freed upload and page buffers go back to the system."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import ctypes, sys
from frame.daemon.allocator import tune_allocator
if sys.argv[1] == "tuned":
    assert tune_allocator()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS:')).split()[1])
libc.free(libc.malloc(4 << 20))  # glibc's default: the threshold rises to the largest block freed
before = rss()
blocks = [libc.malloc(256 * 1024) for _ in range(200)]  # 50 MiB, as a waitress thread's buffers
for block in blocks:
    ctypes.memset(block, 1, 256 * 1024)
pin = libc.malloc(64 * 1024)  # something allocated later keeps the heap's top from shrinking
for block in blocks:
    libc.free(block)
print(rss() - before)
"""


def test_freed_large_blocks_go_back_to_the_system_after_tune_allocator():
    """Without it, glibc's threshold rises to the largest freed block and 256 KiB blocks stay in the
    heap after they are freed; with it each is its own mapping, returned when freed."""
    if "glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") or ""):
        pytest.skip("glibc's mallopt")
    kept = {}
    for how in ("default", "tuned"):
        done = subprocess.run([sys.executable, "-c", PROBE, how], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        kept[how] = int(done.stdout.strip())  # KiB still resident of the 50 MiB freed
    assert kept["default"] > 40 * 1024 and kept["tuned"] < 8 * 1024, kept
