"""The daemon's idle RSS next to the render worker's peak RSS (with ``--taste N``, the trained taste
model's child), measured in one run. Until issue 27 this was ``daemon_memory.py``, which now measures
the daemon under page loads, hostile uploads and a night.

    /work/venv/bin/python benchmarks/worker_taste_memory.py [--steps 8] [--size 256x160] [--taste 12]

1. Starts the real daemon (``python -m frame --config FILE run``) on a temporary state folder, waits
   until its API answers and it has idled for a few seconds, and reads its VmRSS / VmHWM from /proc.
   It also asks the daemon's Python which heavy modules it has imported (must be none).
2. Runs one night (``run_night``) on the bundled demo model, whose worker reports its own peak RSS
   (``VmHWM``) and is polled by the supervisor. ``--taste N`` first stores N rated pictures (liked and
   disliked themes, ``taste.explore_rate`` 0) so the trained taste model makes the choice and draws
   its plot; without it the choice is made for variety (no scikit-learn).

Prints both numbers side by side; docs/daemon.md records the results.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEAVY = ("numpy", "sklearn", "matplotlib", "PIL", "onnx", "onnxruntime", "torch", "scipy")


TOKEN = "taste-bench-token-0123"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _proc_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def daemon_idle(state: Path, idle_seconds: float) -> dict[str, float]:
    port = _port()
    config = state / "config.yaml"
    config.write_text(yaml.safe_dump({
        "state_dir": str(state / "daemon"), "web": {"listen": f"127.0.0.1:{port}", "token": TOKEN},
        "schedule": {"timezone": "UTC", "render_at": "03:00", "deadline": "03:01", "show_at": "03:01",
                     "misfire_grace_minutes": 0}}))
    probe = ("import sys, frame.cli as c; import atexit; "
             f"atexit.register(lambda: open({str(state / 'modules.txt')!r}, 'w').write("
             f"' '.join(m for m in {HEAVY!r} if m in sys.modules))); sys.exit(c.main())")
    proc = subprocess.Popen([sys.executable, "-c", probe, "--config", str(config), "run"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                requests.get(f"http://127.0.0.1:{port}/api/status", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        time.sleep(idle_seconds)
        requests.get(f"http://127.0.0.1:{port}/api/pictures", timeout=5,
                     headers={"Authorization": f"Bearer {TOKEN}"})  # every read needs the owner (issue 40)
        rss, hwm = _proc_kib(proc.pid, "VmRSS"), _proc_kib(proc.pid, "VmHWM")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    modules = (state / "modules.txt").read_text().split()
    return {"rss_mb": rss / 1024, "hwm_mb": hwm / 1024, "heavy_modules": modules}


def seed_ratings(config, count: int) -> None:
    """``count`` rated pictures: the first half of the themes liked, the rest disliked."""
    from frame.config import state_dir
    from frame.daemon.store.database import Store

    store = Store.open(state_dir(config))
    try:
        themes, styles = config.taste.themes, config.taste.styles
        for i in range(count):
            theme, style = themes[i % len(themes)], styles[i % len(styles)]
            picture = store.add_picture(night=f"2026-01-{i + 1:02d}", file=f"p{i}.png", panel_file=f"p{i}-panel.png",
                                        prompt=f"{theme}, {style}", theme=theme, style=style, origin="theme")
            store.rate(picture, "thumb", 1 if themes.index(theme) < len(themes) // 2 else -1)
    finally:
        store.close()


def worker_peak(state: Path, steps: int, size: str, ratings: int = 0) -> dict[str, float | str]:
    from frame.config import Config
    from frame.daemon.jobs.night import run_night

    base = Config(state_dir=str(state / "night"))
    config = dataclasses.replace(
        base, model=dataclasses.replace(base.model, source="demo", steps=steps, size=size),
        display=dataclasses.replace(base.display, panel="virtual"),
        taste=dataclasses.replace(base.taste, explore_rate=0.0, min_ratings=min(ratings, 10) or 10))
    if ratings:
        seed_ratings(config, ratings)
    started = time.monotonic()
    result = run_night(config, show=True)
    return {"peak_mb": result.peak_rss_mb, "seconds": time.monotonic() - started, "prompt": result.prompt}


def _how(worker: dict) -> str:
    return "taste model" if worker.get("ratings") else "variety, no ratings"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="as frame demo")
    parser.add_argument("--size", default="256x160", help="as frame demo")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds the daemon idles before measuring")
    parser.add_argument("--taste", type=int, default=0, metavar="N",
                        help="store N rated pictures first, so the trained taste model chooses")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        daemon = daemon_idle(Path(tmp), args.idle)
        try:
            worker = {**worker_peak(Path(tmp), args.steps, args.size, args.taste), "ratings": args.taste}
        except Exception as exc:  # report what could be measured
            worker = {"error": f"{type(exc).__name__}: {exc}"}
    print(f"{'process':<28}{'RSS (MiB)':>12}")
    print(f"{'daemon, idle':<28}{daemon['rss_mb']:>12.1f}   (high-water {daemon['hwm_mb']:.1f})")
    print(f"  heavy modules in daemon: {', '.join(daemon['heavy_modules']) or 'none'}")
    if "error" in worker:
        print(f"{'render worker, peak':<28}{'n/a':>12}   ({worker['error']})")
        return 1
    print(f"{'render worker, peak':<28}{worker['peak_mb']:>12.1f}   "
          f"(demo model, {args.size}, {args.steps} steps, {_how(worker)}, night took {worker['seconds']:.1f} s)")
    print(f"  chose: {worker['prompt']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
