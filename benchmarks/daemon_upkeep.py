"""The daemon's memory upkeep, on and off, side by side under the same traffic (issue 27).

    PYTHONPATH=. python benchmarks/daemon_upkeep.py [--minutes 30] [--rate 4] [--render-every 45] [--warmup 5]

Two real daemons (``frame run``, demo model, 30 seeded pictures, retention at 40, an always-failing
feed refreshed every minute) run at once, each with its own phone (``daemon_soak.Traffic``: pages at
``--rate`` per second, a rating every 10 s, a render every ``--render-every`` s):

* **off**: frame's CLI started by ``python -c`` with ``frame.daemon.allocator.settle_startup`` and
  ``upkeep`` replaced by no-ops; not being frame's own command line, it is not re-executed with
  ``PYTHONMALLOC=malloc`` either: the daemon as it was before (pymalloc, no upkeep);
* **on**: ``python -m frame run`` as it ships (re-executed on the system malloc, startup objects
  frozen, a full collection and ``malloc_trim`` every ``UPKEEP_SECONDS``).

Both share the machine's load, so their difference is the upkeep's. The traffic is denser than the
2-hour soak's (``daemon_soak.py``: 2 pages/s, a render a minute), so a growth shows within half an
hour; the soak stays the target's measurement. Prints, for each side, the least-squares RSS slope
after ``--warmup`` minutes (MiB/h), RSS at the start and end of the fit and the CPU seconds used.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import daemon_soak  # noqa: E402
import daemonrun  # noqa: E402

WITHOUT_UPKEEP = (
    "import runpy, sys\n"
    "import frame.daemon.allocator as allocator\n"
    "allocator.settle_startup = lambda: 0\n"
    "allocator.upkeep = lambda: 0\n"
    "sys.argv = ['frame', *sys.argv[1:]]\n"
    "runpy.run_module('frame', run_name='__main__', alter_sys=True)\n")


class Side(daemonrun.Daemon):
    """One daemon of the comparison: ``python -m frame run`` (upkeep on) or the no-op wrapper (off)."""

    def __init__(self, folder: Path, port: int, config: Path, upkeep: bool) -> None:
        super().__init__(folder, port, config, ("-m", "frame") if upkeep else ("-c", WITHOUT_UPKEEP))

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_side(folder: Path, upkeep: bool, rate: float, render_every: float) -> tuple[Side, daemon_soak.Traffic]:
    daemonrun.seed_pictures(folder / "state", 30)
    port = daemonrun.free_port()
    side = Side(folder, port, daemon_soak.soak_config(folder, port), upkeep)
    traffic = daemon_soak.Traffic(render_every, rate=rate)
    traffic.aim(side.base)
    threading.Thread(target=traffic.run, daemon=True).start()
    return side, traffic


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=4.0, help="page loads per second, each side")
    parser.add_argument("--render-every", type=float, default=45.0)
    parser.add_argument("--warmup", type=float, default=5.0, help="minutes left out of the fit")
    args = parser.parse_args()
    names = ("off", "on")
    with tempfile.TemporaryDirectory() as tmp:
        sides = [start_side(Path(tmp) / name, name == "on", args.rate, args.render_every) for name in names]
        samples: list[list[tuple[float, float]]] = [[], []]
        started = time.monotonic()
        while time.monotonic() < started + args.minutes * 60:
            for number, (side, _) in enumerate(sides):
                samples[number].append((time.monotonic(), side.rss_mb()))
            time.sleep(5)
        cpu = [side.cpu_seconds() for side, _ in sides]
        for side, traffic in sides:
            traffic.stop.set()
            side.stop()
    print(f"upkeep off vs on: {args.minutes:.0f} min side by side, {args.rate:g} page loads/s and a render every "
          f"{args.render_every:.0f} s each, warm-up {args.warmup:.0f} min")
    print(f"{'upkeep':<8}{'page loads':>12}{'RSS start→end (MiB)':>22}{'slope MiB/h':>14}{'CPU s':>8}  client errors")
    for number, name in enumerate(names):
        warm = [s for s in samples[number] if s[0] - started >= args.warmup * 60]
        slope = daemon_soak.slope_per_hour(warm)
        traffic = sides[number][1]
        print(f"{name:<8}{traffic.pages:>12}{f'{warm[0][1]:.1f}→{warm[-1][1]:.1f}':>22}{slope:>14.2f}"
              f"{cpu[number]:>8.0f}  {traffic.errors or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
