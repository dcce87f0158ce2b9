"""Peak memory and time of ``frame model import`` on a full-size SD 1.5 or SDXL checkpoint (target: ≤ 200 MB).

The checkpoint is random (float16, seeded) in the real single-file key layout: every key and shape of
``tests/fixtures/checkpoints/manifests/<kind>.json.gz`` (tools/checkpoint_manifests.py, made from the
published configs; SD 1.5 2.1 GB, SDXL 6.9 GB), written once to ``--cache``. Each import runs ``frame model import``
in its own process, which reports its peak RSS (``VmHWM``), wall and CPU seconds and the bytes
written; from disk, and from ``frame serve-model`` on 127.0.0.1 (range requests). Several runs per
case: the medians are printed, with a projection for a Raspberry Pi Zero 2 W from docs/estimate.md's
rates: the card read at 23 MB/s (disk) or Wi-Fi at 3 MB/s (URL), the output written to the card at
the same 23 MB/s (an assumption: the review measured reads), and the CPU time × 8 (docs/estimate.md's
assumption for an in-order 1 GHz A53 core against this machine's).

    .venv/bin/python benchmarks/model_import.py [--kind sd15|sdxl] [--cache /tmp/frame-bench]
        [--modes fp16,uint8] [--sources disk,http] [--runs 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "tests" / "fixtures" / "checkpoints" / "manifests"
TARGET_MB = 200
PI_CARD_MB_S, PI_WIFI_MB_S, PI_CPU_FACTOR = 23.0, 3.0, 8.0
CODES = {"F16": np.float16, "I64": np.int64}


def write_checkpoint(path: Path, kind: str) -> Path:
    """The random full-size checkpoint, written tensor by tensor (once; reused if present)."""
    if path.is_file():
        return path
    tensors = json.loads(gzip.decompress((MANIFESTS / f"{kind}.json.gz").read_bytes()))["tensors"]
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(CODES[dtype]).itemsize
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    rng = np.random.default_rng(41)
    partial = path.with_suffix(".partial")
    with open(partial, "wb") as file:
        file.write(struct.pack("<Q", len(raw)) + raw)
        for dtype, shape in tensors.values():
            if dtype == "I64":
                file.write(np.arange(int(np.prod(shape)), dtype=np.int64).tobytes())
                continue
            rows = shape[0] if shape else 1
            inner = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            step = max(1, (8 << 20) // max(1, inner))
            for first in range(0, rows, step):
                count = min(step, rows - first)
                file.write((rng.standard_normal(count * inner, dtype=np.float32) * 0.02).astype(np.float16).tobytes())
    os.replace(partial, path)
    return path


def vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(src: str, dst: str, mode: str) -> None:
    from frame.cli.program import main as frame_main

    started, cpu = time.perf_counter(), time.process_time()
    with open(os.devnull, "w") as quiet:
        stdout, stderr, sys.stdout, sys.stderr = sys.stdout, sys.stderr, quiet, quiet
        try:
            code = frame_main(["model", "import", src, dst, "--weights", mode])
        finally:
            sys.stdout, sys.stderr = stdout, stderr
    if code:
        raise SystemExit(code)
    written = sum(p.stat().st_size for p in Path(dst).rglob("*") if p.is_file())
    print(json.dumps({"peak_rss_mb": round(vm_hwm_mb(), 1), "wall_s": round(time.perf_counter() - started, 1),
                      "cpu_s": round(time.process_time() - cpu, 1), "written_mb": round(written / 1e6, 1)}))


def run_once(src: str, dst: Path, mode: str) -> dict:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.rmtree(dst.with_name(f".{dst.name}.import"), ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, "--child", src, str(dst), mode], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"import failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    shutil.rmtree(dst, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def serve(folder: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "frame", "serve-model", str(folder), "--listen",
                               f"127.0.0.1:{port}"], env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, f"http://127.0.0.1:{port}/"
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise SystemExit("frame serve-model did not start")


def pi_projection(source: str, checkpoint_mb: float, result: dict) -> float:
    read = checkpoint_mb / (PI_WIFI_MB_S if source == "http" else PI_CARD_MB_S)
    return read + result["written_mb"] / PI_CARD_MB_S + result["cpu_s"] * PI_CPU_FACTOR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("sd15", "sdxl"), default="sd15")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/frame-bench"))
    parser.add_argument("--modes", default="fp16,uint8")
    parser.add_argument("--sources", default="disk,http")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("SRC", "DST", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    args.cache.mkdir(parents=True, exist_ok=True)
    checkpoint = write_checkpoint(args.cache / f"{args.kind}-random.safetensors", args.kind)
    checkpoint_mb = checkpoint.stat().st_size / 1e6
    server, base = serve(args.cache) if "http" in args.sources.split(",") else (None, "")
    try:
        for source in args.sources.split(","):
            src = str(checkpoint) if source == "disk" else base + checkpoint.name
            for mode in args.modes.split(","):
                results = [run_once(src, args.cache / f"out-{source}-{mode}", mode) for _ in range(args.runs)]
                median = {key: statistics.median(r[key] for r in results) for key in results[0]}
                verdict = "OK" if median["peak_rss_mb"] <= TARGET_MB else "over target"
                print(json.dumps({"kind": args.kind, "source": source, "weights": mode,
                                  "checkpoint_mb": round(checkpoint_mb), "runs": len(results), "median": median,
                                  "peaks_mb": [r["peak_rss_mb"] for r in results],
                                  "pi_projection_min": round(pi_projection(source, checkpoint_mb, median) / 60, 1)})
                      + f"  {verdict}", flush=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
