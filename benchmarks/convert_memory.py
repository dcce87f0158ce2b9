"""Peak memory and time of ``frame model convert`` on the full-size SD 1.5 models (target: ≤ 300 MB).

Each conversion runs ``frame model convert`` in its own process, which reports its own peak RSS
(``VmHWM`` from /proc/self/status), wall and CPU seconds and the bytes written. Sources: the
full-size random-weight SD 1.5 export of ``benchmarks/engine_vs_onnxruntime.py`` (``--cache``), as
the pipeline folder ``benchmarks/sd_memory.py`` assembles; outputs go to ``<cache>-pipeline-<mode>``
(kept: the memory and quality benchmarks use them). Several runs per case: the median is printed.

    .venv/bin/python benchmarks/convert_memory.py [--cache /work/cache/sd15-full] [--modes uint8,fp16]
        [--what unet|folder] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = 300


def vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(src: str, dst: str, mode: str) -> None:
    from frame.cli.program import main as frame_main

    started, cpu = time.perf_counter(), time.process_time()
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            code = frame_main(["model", "convert", src, dst, "--weights", mode])
        finally:
            sys.stdout = stdout
    if code:
        raise SystemExit(code)
    written = sum(p.stat().st_size for p in Path(dst).rglob("*") if p.is_file()) if Path(dst).is_dir() else \
        sum(p.stat().st_size for p in Path(dst).parent.glob(Path(dst).name + "*"))
    print(json.dumps({"peak_rss_mb": round(vm_hwm_mb(), 1), "wall_s": round(time.perf_counter() - started, 1),
                      "cpu_s": round(time.process_time() - cpu, 1), "written_mb": round(written / 1e6, 1)}))


def run_once(src: Path, dst: Path, mode: str) -> dict:
    if dst.is_dir():
        shutil.rmtree(dst)
    for leftover in dst.parent.glob(dst.name + "*"):
        leftover.unlink()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, "--child", str(src), str(dst), mode], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"conversion failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/sd15-full"))
    parser.add_argument("--modes", default="uint8,fp16")
    parser.add_argument("--what", choices=("unet", "folder"), default="unet")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("SRC", "DST", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sd_memory import assemble

    folder = assemble(args.cache)
    for mode in args.modes.split(","):
        if args.what == "unet":
            src = folder / "unet" / "model.onnx"
            out_dir = Path(f"{folder}-{mode}-unet-only")
            out_dir.mkdir(exist_ok=True)
            dst = out_dir / "model.onnx"
        else:
            src, dst = folder, Path(f"{folder}-{mode}")
        results = [run_once(src, dst, mode) for _ in range(args.runs)]
        summary = {key: statistics.median(r[key] for r in results) for key in results[0]}
        verdict = "OK" if summary["peak_rss_mb"] <= TARGET_MB else "over target"
        print(json.dumps({"source": str(src), "weights": mode, "runs": len(results), "median": summary,
                          "peaks_mb": [r["peak_rss_mb"] for r in results]}) + f"  {verdict}", flush=True)


if __name__ == "__main__":
    main()
