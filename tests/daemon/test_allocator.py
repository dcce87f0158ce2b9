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


class _Cycle:
    def __init__(self) -> None:
        self.me = self  # a reference cycle, as werkzeug's matcher closure and a failed feed's traceback leave


def test_upkeep_frees_the_cycles_page_loads_leave():
    import gc
    import weakref

    from frame.daemon.allocator import upkeep

    gc.disable()  # the collector's own thresholds must not do the work the test asks of upkeep
    try:
        refs = [weakref.ref(_Cycle()) for _ in range(500)]
        assert all(ref() is not None for ref in refs)  # unreachable, not freed: only a collection frees them
        assert upkeep() >= 500
        assert all(ref() is None for ref in refs)
    finally:
        gc.enable()


def test_the_daemon_loop_keeps_house_every_upkeep_seconds(monkeypatch):
    """``Daemon.run_forever`` calls ``allocator.upkeep`` every ``UPKEEP_SECONDS`` (not every tick)."""
    import threading
    import time
    from types import SimpleNamespace

    from frame.daemon import allocator
    from frame.daemon.service import Daemon

    calls: list[float] = []
    ticks: list[float] = []
    monkeypatch.setattr(allocator, "UPKEEP_SECONDS", 0.25)
    monkeypatch.setattr(allocator, "upkeep", lambda: calls.append(time.monotonic()) or 0)
    monkeypatch.setenv("WATCHDOG_USEC", "40000")  # a loop tick every 20 ms
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    stop = threading.Event()

    def tick() -> None:
        ticks.append(time.monotonic())
        if len(ticks) >= 60:
            stop.set()

    fake = SimpleNamespace(stop_event=stop, notifier=SimpleNamespace(watchdog=lambda: None),
                           _flush_pending_show=lambda: None, refresh_status=tick)
    Daemon.run_forever(fake)
    elapsed = ticks[-1] - ticks[0]
    assert 1 <= len(calls) <= elapsed / 0.25 + 1, (len(calls), elapsed)
    assert all(later - earlier >= 0.24 for earlier, later in zip(calls, calls[1:]))


def test_frame_run_freezes_its_startup_objects(tmp_path):
    """The real ``frame run`` freezes what its start made, so the collector's full passes walk only
    what came after (``allocator.settle_startup``); its log says how many."""
    import re

    from tests.daemon.daemonproc import DaemonProcess, write_config

    config, url = write_config(tmp_path)
    daemon = DaemonProcess(config, url)
    try:
        log = config.with_suffix(".log")
        found = daemon.wait_for(lambda: re.search(rb"(\d+) startup objects frozen", log.read_bytes()), timeout=20)
        assert int(found.group(1)) > 10_000  # the modules, the app, its templates
    finally:
        daemon.terminate()
        daemon.kill()


def test_only_frames_own_command_line_is_re_executed():
    from frame.daemon.allocator import frame_command_line

    py = "/opt/frame/bin/python3"
    assert frame_command_line([py, "-m", "frame", "--config", "c.yaml", "run"])
    assert frame_command_line([py, "-X", "dev", "-m", "frame", "run"])
    assert frame_command_line([py, "/usr/local/bin/frame", "run"])  # the console script, by its shebang
    assert frame_command_line([py, "-m", "pytest", "-q"]) is None  # a test calling cmd_run: never exec'd
    assert frame_command_line([py, "-c", "import frame"]) is None
    assert frame_command_line([py]) is None


@pytest.mark.parametrize("owners", ["", "glibc.malloc.arena_max=1"])
def test_the_re_executed_daemon_keeps_its_allocator_settings_from_its_workers(monkeypatch, owners):
    """The workers get the owner's environment back: pymalloc and glibc's thread caches."""
    from frame.config import environment
    from frame.daemon import allocator

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    for name, value in allocator.system_malloc_environment(
            {"GLIBC_TUNABLES": owners} if owners else {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(allocator.os, "execve", lambda *a: pytest.fail("exec'd twice"))
    allocator.use_system_malloc()
    assert "PYTHONMALLOC" not in os.environ and environment.SYSTEM_MALLOC not in os.environ
    assert os.environ.get("GLIBC_TUNABLES") == (owners or None)


THREAD_CACHE_PROBE = """
import ctypes, threading
class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
libc.malloc_trim.argtypes = (ctypes.c_size_t,)
libc.mallinfo2.restype = Mallinfo2
freed, done = threading.Event(), threading.Event()
def web_thread():  # a long-lived thread that frees small blocks of many sizes, as page loads do
    for block in [libc.malloc(size) for size in range(16, 1024, 16) for _ in range(7)]:
        libc.free(block)
    freed.set()
    done.wait()
libc.malloc_trim(0)
before = libc.mallinfo2().uordblks
thread = threading.Thread(target=web_thread)
thread.start()
freed.wait()
libc.malloc_trim(0)  # the daemon's upkeep
print(libc.mallinfo2().uordblks - before)
done.set()
thread.join()
"""


@pytest.mark.skipif("glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") or ""), reason="glibc's thread caches")
def test_the_daemons_threads_keep_no_freed_blocks_that_upkeep_cannot_return():
    """With glibc's defaults a thread keeps ~260 KiB of freed small blocks (7 of each size) that count
    as in use and survive ``malloc_trim``; the environment ``frame run`` re-executes with keeps none."""
    from frame.daemon import allocator

    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}

    def held(env: dict[str, str]) -> int:
        out = subprocess.run([sys.executable, "-c", THREAD_CACHE_PROBE], env={**env, "PYTHONMALLOC": "malloc"},
                             capture_output=True, text=True, timeout=60, check=True)
        return int(out.stdout)

    assert held(plain) > 150_000  # the probe sees the caches where they are on
    assert held(allocator.system_malloc_environment(plain)) < 80_000


def test_frame_run_runs_on_the_system_malloc_in_the_same_process(tmp_path):
    """``frame run`` re-executes itself once with ``PYTHONMALLOC=malloc`` (same PID: systemd's main
    process and watchdog stay) and still serves."""
    if "glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") or ""):
        pytest.skip("glibc's malloc_trim is what makes the system malloc worth it")
    from tests.daemon.daemonproc import DaemonProcess, write_config

    config, url = write_config(tmp_path)
    daemon = DaemonProcess(config, url)
    try:
        environ = Path(f"/proc/{daemon.proc.pid}/environ").read_bytes().split(b"\0")
        assert b"PYTHONMALLOC=malloc" in environ  # what it was exec'd with
        assert b"GLIBC_TUNABLES=glibc.malloc.tcache_count=0" in environ
        assert daemon.get("/api/status").json()["state"] == "idle"
    finally:
        daemon.terminate()
        daemon.kill()


INTERNED_PROBE = """
import ctypes, gc, sys
import apscheduler.schedulers.background, feedparser, flask, requests, waitress  # the daemon's stack
import frame.daemon.service
from frame.daemon.allocator import grow_interned_strings, tune_allocator
tune_allocator()  # as frame run: a block of 128 KiB or more is its own mapping
libc = ctypes.CDLL(None)
def rss():
    gc.collect()
    libc.malloc_trim(0)
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS:')).split()[1])
if sys.argv[1] == "grown":
    grow_interned_strings()
before = rss()
for i in range(200_000):  # hours of page loads' interned names, each freed with its object
    sys.intern(f"later-{i}")
print(rss() - before)
"""


def test_the_interned_string_table_reaches_its_lasting_size_at_startup():
    """Every daemon soak grew one step of +0.9 MiB 40-50 minutes in and stayed flat after it: CPython's
    table of interned strings, rebuilt at twice its size once the entries of freed interned strings
    ran out (tracemalloc: a 961,216-byte block, a 65,536-slot table). ``settle_startup`` now makes
    that rebuild happen at startup (``grow_interned_strings``), so later churn adds nothing."""
    if "glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") or ""):
        pytest.skip("glibc's malloc_trim")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONMALLOC": "malloc"}  # as the daemon runs
    done = subprocess.run([sys.executable, "-c", INTERNED_PROBE, "grown"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) < 256, f"{done.stdout.strip()} KiB more after the churn"
