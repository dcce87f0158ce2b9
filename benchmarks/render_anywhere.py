"""Where pictures are painted: one picture through ``frame serve-render`` with frame's engine vs
onnxruntime as execution provider, measured from the frame's side (docs/render-anywhere.md).

The server runs as its own process (``python -m frame serve-render``) on the full-size random-weight
SD 1.5 components (``/work/cache/sd15-full``, dressed as a diffusers export by
``benchmarks/sd_memory.py``'s ``assemble`` under ``--work``); the client is a second process doing
exactly what a frame's night does (``frame.remote.render_remote``). Reported per picture, median of
``--runs``: wall time seen by the client, the server's CPU time for the job (utime+stime from
/proc/PID/stat before and after), the server's peak RSS (``VmHWM`` of its /proc/PID/status, from load
to the end of the last job), and the client's own peak RSS (its VmHWM: what the frame needs while
the server paints). Both engines are measured in one run, one after the other.

Usage (onnxruntime on fp32 SD 1.5 needs > 3 GB: run it under the shared lock)::

    flock /work/locks/bigmem.lock .venv/bin/python benchmarks/render_anywhere.py --steps 2 --runs 3
    .venv/bin/python benchmarks/render_anywhere.py --engines frame --model demo --size 512x320 --steps 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "benchmark-token-123"
CLIENT = r"""
import json, sys, time
from frame.config.schema import RemoteRenderConfig
from frame.remote import RemoteJob, render_remote
url, token, width, height, steps, seed = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
settings = RemoteRenderConfig(url=url, token=token, job_timeout_minutes=120, poll_seconds=2, lost_after_seconds=600)
job = RemoteJob("a lighthouse in a storm, oil painting", "blurry", steps, 7.5, "euler", seed, width, height)
started = time.monotonic()
result = render_remote(settings, job)
seconds = time.monotonic() - started
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
print(json.dumps({"seconds": seconds, "client_mb": hwm, "size": list(result.image.size)}))
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_listening(proc: subprocess.Popen, timeout: float = 900) -> int:
    """The port the server printed once its pipeline was loaded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise SystemExit(f"serve-render exited with {proc.returncode}")
        if "(port " in line:
            return int(line.split("(port ")[1].split(")")[0])
    raise SystemExit("serve-render did not start in time")


def measure(engine: str, model: str, width: int, height: int, steps: int, runs: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "frame", "serve-render", "--listen", f"127.0.0.1:{free_port()}",
                             "--token",
                             TOKEN, "--model", model, "--engine", engine], stdout=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)
    try:
        load_started = time.monotonic()
        port = wait_listening(proc)
        load_seconds = time.monotonic() - load_started
        rows = []
        for run in range(runs):
            cpu_before = server_cpu_seconds(proc.pid)
            argv = [f"http://127.0.0.1:{port}", TOKEN, str(width), str(height), str(steps), str(run)]
            out = subprocess.run([sys.executable, "-c", CLIENT, *argv], capture_output=True, text=True, env=env,
                                 check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["server_cpu"] = server_cpu_seconds(proc.pid) - cpu_before
            rows.append(row)
            print(f"  {engine} run {run + 1}: {row['seconds']:.1f} s wall, {row['server_cpu']:.1f} s server CPU, "
                  f"client {row['client_mb']:.0f} MB", flush=True)
        return {"engine": engine, "load_seconds": load_seconds, "server_mb": server_hwm_mb(proc.pid),
                "seconds": statistics.median(r["seconds"] for r in rows),
                "server_cpu": statistics.median(r["server_cpu"] for r in rows),
                "client_mb": statistics.median(r["client_mb"] for r in rows), "runs": runs}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def full_model(work: Path) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sd_memory import assemble

    link = work / "sd15-full"
    work.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to("/work/cache/sd15-full")
    return str(assemble(link))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="sd15-full", help="sd15-full (assembled under --work), demo, or a folder")
    parser.add_argument("--work", type=Path, default=Path("/work/cache/i17-remote"))
    parser.add_argument("--engines", default="frame,onnxruntime")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    model = full_model(args.work) if args.model == "sd15-full" else args.model
    width, height = (int(v) for v in args.size.split("x"))
    print(f"model {model}, {width}x{height}, {args.steps} steps euler, guidance 7.5, median of {args.runs}")
    results = [measure(engine, model, width, height, args.steps, args.runs) for engine in args.engines.split(",")]
    print("| engine | picture (wall) | server CPU | server peak RSS | client peak RSS | server start |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['engine']} | {r['seconds']:.1f} s | {r['server_cpu']:.1f} s | {r['server_mb']:.0f} MB | "
              f"{r['client_mb']:.0f} MB | {r['load_seconds']:.1f} s |")


if __name__ == "__main__":
    main()
