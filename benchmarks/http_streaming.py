"""One UNet evaluation streamed over HTTP on loopback vs the same model on local disk (target: <= +10 %).

The model folder is served by ``frame serve-model`` (waitress + werkzeug) in its own process on
127.0.0.1; each measurement is its own child process that loads the UNet, either from the folder
(default ``prefetch`` provider) or from the server's URL (the ``HttpPrefetch`` provider: Range requests over
keep-alive, 64 MB read-ahead), and runs one UNet evaluation (no guidance: one pass) at ``--size``.
Reported per run: wall and CPU seconds of the evaluation (the child's own CPU, all its threads; the
server's CPU is its own process and not counted), peak RSS (``VmHWM``), bytes fetched per source kind.
Runs are interleaved disk/http so machine load drifts affect both; medians and the http/disk ratios.

Usage::

    .venv/bin/python benchmarks/http_streaming.py [--folder /work/cache/sd15-full] [--runs 3] [--size 512x512]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def high_water_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(source: str, size: tuple[int, int], budget_mb: int | None) -> None:
    import numpy as np

    from frame.diffusion.conditioning import Conditioning
    from frame.diffusion.denoise import GuidedUNet
    from frame.engine import load_model
    from frame.engine.providers import HttpPrefetch, Prefetch

    rng = np.random.default_rng(0)
    width, height = size
    provider = "prefetch" if budget_mb is None else (HttpPrefetch if source.startswith("http") else Prefetch)(
        budget_bytes=budget_mb << 20)
    with load_model(source, weights=provider) as model:
        hidden = next(i for i in model.inputs if i.name == "encoder_hidden_states").shape[-1]
        unet = GuidedUNet(model, Conditioning(rng.standard_normal((1, 77, hidden)).astype(np.float32)), None,
                          0.0, size)
        latent = rng.standard_normal((1, 4, height // 8, width // 8)).astype(np.float32)
        before, wall, cpu = model.fetch_stats, time.perf_counter(), time.process_time()
        out = unet(latent, 999.0)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        fetched = model.fetch_stats - before
    print(json.dumps({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_mb": round(high_water_mb(), 1),
                      "bytes": fetched.bytes, "http_rate_mb_s": round((fetched.rate("http") or 0) / 1e6, 1),
                      "checksum": float(np.abs(out).sum())}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(folder: str, port: int) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "frame", "serve-model", folder, "--listen", f"127.0.0.1:{port}"],
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    server.stdout.readline()  # "serving ... on http://..." once it listens
    return server


def measure(source: str, size: str, budget_mb: int | None) -> dict:
    command = [sys.executable, __file__, "--child", source, "--size", size]
    if budget_mb is not None:
        command += ["--budget-mb", str(budget_mb)]
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-3:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="/work/cache/sd15-full")
    parser.add_argument("--model", default="unet/model.onnx", help="model file inside the folder")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget-mb", type=int, default=None,
                        help="read-ahead budget of both providers (default: each one's own, 32 MB disk / 64 MB HTTP)")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        child(args.child, tuple(int(v) for v in args.size.split("x")), args.budget_mb)
        return
    port = free_port()
    server = start_server(args.folder, port)
    sources = {"disk": str(Path(args.folder) / args.model), "http": f"http://127.0.0.1:{port}/{args.model}"}
    results: dict[str, list[dict]] = {"disk": [], "http": []}
    try:
        for _ in range(args.runs):
            for kind, source in sources.items():
                results[kind].append(measure(source, args.size, args.budget_mb))
                print(f"  {kind}: {json.dumps(results[kind][-1])}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    medians = {}
    for kind, runs in results.items():
        ok = [r for r in runs if "error" not in r]
        medians[kind] = {key: statistics.median(r[key] for r in ok) for key in ("wall_s", "cpu_s", "peak_mb")}
        print(json.dumps({"source": kind, "runs": len(ok), **medians[kind],
                          "walls_s": [r["wall_s"] for r in ok], "cpus_s": [r["cpu_s"] for r in ok]}))
    wall = medians["http"]["wall_s"] / medians["disk"]["wall_s"]
    cpu = medians["http"]["cpu_s"] / medians["disk"]["cpu_s"]
    verdict = "OK" if wall <= 1.10 and cpu <= 1.10 else "over the 10 % target"
    print(f"http / disk: wall x{wall:.3f}, CPU x{cpu:.3f}  ({verdict})")


if __name__ == "__main__":
    main()
