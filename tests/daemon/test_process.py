"""The daemon as an operating-system process: what it costs while idle, one per state directory."""

from __future__ import annotations

import time

from tests.daemon.daemonproc import DaemonProcess, idle_cpu_share, write_config


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
