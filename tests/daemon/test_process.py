"""The daemon as an operating-system process: what it costs while idle, one per state directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from frame.daemon.lock import DaemonRunning, StateDirLock
from tests.daemon.daemonproc import ROOT, DaemonProcess, idle_cpu_share, write_config
from tests.ports import free_port


def test_idle_daemon_uses_almost_no_cpu(tmp_path):
    """An idle ``frame run`` sleeps: under 2 % of a core (the HTTP loop once polled with a zero timeout,
    ~96 % of a core forever). benchmarks/daemon_idle.py measures the same over 10 s."""
    config, url = write_config(tmp_path)
    daemon = DaemonProcess(config, url)
    try:
        time.sleep(1.0)  # let start-up work (first status refresh, scheduler threads) settle
        share = idle_cpu_share(daemon.proc.pid, 4.0)
        assert share < 0.02, f"the idle daemon used {share:.1%} of a core"
    finally:
        daemon.terminate()
        daemon.kill()


def test_second_daemon_on_the_same_state_dir_exits_1_naming_the_first(tmp_path):
    config, url = write_config(tmp_path)
    first = DaemonProcess(config, url)
    try:
        first.post("/api/prompts", {"prompt": "a red fox"})
        # on another port, so only the state directory is shared
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAME_WEB__LISTEN": f"127.0.0.1:{free_port()}"}
        second = subprocess.run([sys.executable, "-m", "frame", "--config", str(config), "run"], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1, second.stderr
        assert f"PID {first.proc.pid}" in second.stderr and "already running" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr  # one clear line
        assert first.proc.poll() is None and first.get("/api/status").json()["queued_prompts"] == 1
    finally:
        first.terminate()
        first.kill()
    again = DaemonProcess(config, url)  # the lock went with the first daemon
    try:
        assert again.get("/api/status").json()["state"] == "idle"
    finally:
        again.terminate()
        again.kill()


def test_lock_is_exclusive_and_dies_with_its_holder(tmp_path):
    held = StateDirLock.acquire(tmp_path)
    with pytest.raises(DaemonRunning, match=f"PID {os.getpid()}"):
        StateDirLock.acquire(tmp_path)
    held.release()
    StateDirLock.acquire(tmp_path).release()

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from frame.daemon.lock import StateDirLock; "
         f"StateDirLock.acquire({str(tmp_path)!r}); print('held', flush=True); time.sleep(60)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DaemonRunning, match=f"PID {holder.pid}"):
            StateDirLock.acquire(tmp_path)
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs, the kernel drops the lock
        holder.wait()
    StateDirLock.acquire(tmp_path).release()
