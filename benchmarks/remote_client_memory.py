"""What the frame needs while a render server paints: the client's own peak memory and CPU time for
one picture from an AUTOMATIC1111 server and from a ComfyUI server, measured in one run.

Both servers are the test servers of ``tests/remote`` (``FakeA1111``, ``FakeComfyUI``: the APIs'
real requests and answers, a gradient instead of a model) started in this process; each client is a
fresh child process (``python -c``) doing exactly what a frame's night does (``render_remote`` /
``render_comfyui`` with a progress callback, so ComfyUI's websocket reader runs too). Reported per
backend, median of ``--runs``: the child's peak RSS (``VmHWM`` of its own /proc/self/status, read
after the picture), its CPU time (``os.times``) and wall time.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/remote_client_memory.py --size 512x512 --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CLIENT = r"""
import json, os, sys, time
from frame.config.schema import RemoteRenderConfig
from frame.remote import RemoteJob, render_comfyui, render_remote
backend, url, width, height = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
settings = RemoteRenderConfig(url=url, poll_seconds=0.2, lost_after_seconds=30)
job = RemoteJob("a lighthouse in a storm, oil painting", "blurry", 25, 7.0, "dpm++2m_karras", 42, width, height)
started, cpu = time.monotonic(), os.times()
result = (render_comfyui if backend == "comfyui" else render_remote)(settings, job, progress=lambda report: None)
spent = os.times()
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"size": list(result.image.size), "peak_mib": hwm / 1024, "wall": time.monotonic() - started,
                  "cpu": spent.user + spent.system - cpu.user - cpu.system}))
"""


def measure(backend: str, url: str, width: int, height: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CLIENT, backend, url, str(width), str(height)], check=True,
                         capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    from tests.remote.fake_a1111 import FakeA1111
    from tests.remote.fake_comfyui import FakeComfyUI

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--job-seconds", type=float, default=2.0)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    print(f"client of one {width}x{height} picture, median of {args.runs} runs (job {args.job_seconds:g} s)")
    print(f"{'backend':10} {'peak RSS MiB':>13} {'CPU s':>7} {'wall s':>7}")
    for backend, server in (("remote", FakeA1111), ("comfyui", FakeComfyUI)):
        with server(job_seconds=args.job_seconds) as fake:
            runs = [measure(backend, fake.url, width, height) for _ in range(args.runs)]
        assert all(run["size"] == [width, height] for run in runs)
        print(f"{backend:10} {statistics.median(r['peak_mib'] for r in runs):13.1f} "
              f"{statistics.median(r['cpu'] for r in runs):7.2f} {statistics.median(r['wall'] for r in runs):7.2f}"
              f"   (peaks {', '.join(format(r['peak_mib'], '.1f') for r in runs)})")


if __name__ == "__main__":
    main()
