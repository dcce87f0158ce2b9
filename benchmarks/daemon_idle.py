"""Idle daemon CPU: how much of one core a running ``frame run`` uses while nothing happens.

    .venv/bin/python benchmarks/daemon_idle.py [--seconds 10] [--runs 3]

Starts the real daemon (``python -m frame --config FILE run``) on a temporary state folder, waits until
its API answers and start-up has settled, then reads the process's user+system CPU time from
``/proc/PID/stat`` before and after ``--seconds`` of wall time. Repeats ``--runs`` times (a fresh
daemon each time) and prints every run and the median. The target is under 2 % of one core: on a
Pi Zero 2 W the daemon shares four slow cores with the nightly render and should cost nothing while
it waits. (Before issue 13 it used ~96 % of a core: waitress polled its sockets with a zero timeout.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.daemon.daemonproc import DaemonProcess, idle_cpu_share, write_config  # noqa: E402

TARGET = 0.02


def one_run(seconds: float) -> float:
    with tempfile.TemporaryDirectory(prefix="frame-idle-") as tmp:
        config, url = write_config(Path(tmp))
        daemon = DaemonProcess(config, url)
        try:
            time.sleep(2.0)  # start-up settles (first status refresh, scheduler and HTTP threads)
            return idle_cpu_share(daemon.proc.pid, seconds)
        finally:
            daemon.terminate()
            daemon.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="idle wall time measured per run")
    parser.add_argument("--runs", type=int, default=3, help="fresh daemons to measure (median reported)")
    args = parser.parse_args()
    shares = []
    for run in range(args.runs):
        share = one_run(args.seconds)
        shares.append(share)
        print(f"run {run + 1}: {share:.2%} of one core over {args.seconds:.0f} s wall "
              f"({share * args.seconds:.3f} s CPU)")
    median = statistics.median(shares)
    verdict = "meets" if median < TARGET else "MISSES"
    print(f"idle daemon CPU, median of {len(shares)}: {median:.2%} of one core "
          f"(target < {TARGET:.0%}: {verdict})")
    return 0 if median < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
