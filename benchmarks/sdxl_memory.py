"""Peak memory of full-size SDXL, row by row of issue 11's table, each in its own process, beside onnxruntime.

Uses the random-weight SDXL folders of ``tools/sdxl_full_export.py`` (``<root>/{fp32,fp16,uint8}`` and the
``turbo-*`` layouts). Every measurement is a child process reporting its own ``VmHWM``; ``--runs N``
repeats frame's measurements and prints the median. onnxruntime runs the same model file on the same
inputs, once, under the big-memory lock, watched by the parent: if the machine's available memory
falls under ``--ort-floor-mb`` the child is killed and the row says how far it got.

Rows (``--rows``, comma-separated):

* ``unet1024``: one UNet evaluation at 1024×1024 (128×128 latent), batch 1, 77×2048 context;
* ``unet512``: the same at 512×512 (64×64 latent, SDXL-Turbo's size);
* ``text``: both text encoders on one prompt, as the pipeline runs them (tokenizer, encoder 1, closed,
  encoder 2), hidden states and pooled embedding out;
* ``vae``: the VAE decoder on a 128×128 latent, tiled with the default tiles (32, overlap 8); the seam
  check decodes the same latent untiled (``--seam untiled``: frame, its own process, several GB, under
  the big-memory lock; ``--seam onnxruntime``: onnxruntime's untiled decode of the same file, reused
  from ``--work`` when a previous run left it there) and reports PSNR over the whole picture and over
  the tile overlaps only, and the largest pixel difference, tiled against untiled;
* ``turbo``: a whole night (``run_night``, as ``frame demo`` and the daemon run it) on the SDXL-Turbo
  layout at 512×512, 1 step: the peak is the render worker's own VmHWM.

The SD 1.5 render row is ``benchmarks/sd_memory.py --weights uint8 --only render``.

    .venv/bin/python benchmarks/sdxl_memory.py --rows unet1024,unet512 --precisions fp16,uint8 --runs 3
    .venv/bin/python benchmarks/sdxl_memory.py --rows text,vae,turbo --precisions uint8 --ort
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TARGETS_MB = {"unet1024": 300, "unet512": 250, "text": 200, "vae": 300, "turbo": 320}
PROMPT = "a lighthouse on a cliff in a storm, oil painting, dramatic light"
LOCK = "/work/locks/bigmem.lock"


# ----------------------------------------------------------------------------------------- children
def high_water_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def unet_feeds(side: int) -> dict[str, np.ndarray]:
    from memory_profile import make_feeds

    return make_feeds(f"unet-sdxl:{side}")


class Clock:
    """Wall and CPU seconds (this process, plus reaped children: the render worker) since creation."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), self.cpu_now()

    @staticmethod
    def cpu_now() -> float:
        import resource

        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    def lap(self, prefix: str = "") -> dict:
        wall, cpu = time.perf_counter(), self.cpu_now()
        lap = {f"{prefix}seconds": round(wall - self.wall, 1), f"{prefix}cpu_seconds": round(cpu - self.cpu, 1)}
        self.wall, self.cpu = wall, cpu
        return lap


def run_unet(runtime: str, folder: Path, side: int, out: Path) -> dict:
    """One evaluation; the load (onnxruntime: session creation, reading every weight) timed apart from
    the run (frame: streams the weights during the run, so its run includes their reading)."""
    feeds = unet_feeds(side)
    clock = Clock()
    run = _runtime_session(runtime, str(folder / "unet" / "model.onnx"))
    load = clock.lap("load_")
    result = run(feeds)["out_sample"]
    timing = {**load, **clock.lap()}
    np.save(out, result)
    return timing


def _runtime_run(runtime: str, path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return _runtime_session(runtime, path)(feeds)


def _runtime_session(runtime: str, path: str):
    """A loaded model as a function of its feeds (inputs it does not declare are dropped)."""
    if runtime == "frame":
        from frame.engine import load_model

        model = load_model(path)
        names = {i.name for i in model.inputs}

        def run_frame(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            with model:
                return model.run({k: v for k, v in feeds.items() if k in names})

        return run_frame
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    declared = {i.name: i for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]

    def run_ort(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = {k: v.astype(np.int64) if "int64" in declared[k].type else v
                  for k, v in feeds.items() if k in declared}
        return dict(zip(outputs, session.run(outputs, inputs)))

    return run_ort


def run_text(runtime: str, folder: Path, out: Path) -> dict:
    """Both encoders on one prompt, one after the other, like the pipeline (frame: its own code path)."""
    from frame.diffusion import conditioning, load_pipeline

    pipe = load_pipeline(folder)
    clock = Clock()
    if runtime == "frame":
        cond, _ = conditioning.encode_prompts(pipe.encoders, pipe.load, pipe.info, PROMPT, None, False, print)
        hidden, pooled = cond.hidden, cond.pooled
    else:
        parts = []
        for number, encoder in enumerate(pipe.encoders):
            ids = np.asarray([encoder.tokenizer()(PROMPT)], np.int32)
            got = _runtime_run("onnxruntime", str(encoder.source), {"input_ids": ids})
            layers = sorted(int(k.split(".")[1]) for k in got if k.startswith("hidden_states."))
            parts.append(got[f"hidden_states.{layers[-2]}"])
            pooled = got["text_embeds"] if number == 1 else None
            del got
        hidden = np.concatenate(parts, axis=-1)
    np.savez(out, hidden=hidden, pooled=pooled)
    return clock.lap()


def vae_latent() -> np.ndarray:
    """A sampler-scale latent (unit variance): white noise, the harshest case for seams (detail everywhere)."""
    return np.random.default_rng(0).standard_normal((1, 4, 128, 128)).astype(np.float32)


def run_vae(runtime: str, folder: Path, out: Path, tiled: bool) -> dict:
    from frame.diffusion.vae import decoder
    from frame.engine import load_model

    latents = vae_latent()
    source = str(folder / "vae_decoder" / "model.onnx")
    clock = Clock()
    if runtime == "frame":
        pixels = decoder.decode(lambda s: load_model(s), source, latents, 0.13025, 32, 8, tiled=tiled)
    else:
        image = _runtime_run("onnxruntime", source, {"latent_sample": latents / np.float32(0.13025)})["sample"]
        pixels = decoder.to_pixels(image)
    np.save(out, pixels)
    return clock.lap()


def run_turbo(folder: Path, out: Path) -> dict:
    """One night on the Turbo layout: the supervisor starts the real worker, which reports its VmHWM."""
    from PIL import Image

    from frame.config import Config
    from frame.daemon.jobs.night import run_night

    with tempfile.TemporaryDirectory() as state:
        base = Config(state_dir=state)
        config = dataclasses.replace(
            base, model=dataclasses.replace(base.model, source=str(folder), steps=1, size="512x512"),
            display=dataclasses.replace(base.display, panel="virtual"),
            # the worker's default nice 10 starves it on a loaded shared machine; priority changes no memory
            worker=dataclasses.replace(base.worker, nice=os.nice(0)))
        clock = Clock()
        result = run_night(config, show=True)
        timing = clock.lap()  # the worker has been reaped: its CPU time is counted
        with Image.open(result.image) as image:
            np.save(out, np.asarray(image))
    return {**timing, "worker_peak_mb": result.peak_rss_mb}


def child(args: argparse.Namespace) -> None:
    folder, out = Path(args.folder), Path(args.out)
    if args.child == "unet1024":
        detail = run_unet(args.runtime, folder, 128, out)
    elif args.child == "unet512":
        detail = run_unet(args.runtime, folder, 64, out)
    elif args.child == "text":
        detail = run_text(args.runtime, folder, out)
    elif args.child in ("vae", "vae-untiled"):
        detail = run_vae(args.runtime, folder, out, tiled=args.child == "vae")
    else:
        detail = run_turbo(folder, out)
    print(json.dumps({"peak_mb": round(high_water_mb(), 1), **detail}))


# ------------------------------------------------------------------------------------------ parent
@contextlib.contextmanager
def big_memory_lock(path: str):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def measure(row: str, runtime: str, folder: Path, out: Path, floor_mb: float | None = None) -> dict:
    """Run one child; with ``floor_mb``, kill it when the machine's available memory drops below it."""
    command = [sys.executable, __file__, "--child", row, "--runtime", runtime, "--folder", str(folder),
               "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lowest = float("inf")
    while proc.poll() is None:
        time.sleep(0.5)
        lowest = min(lowest, available_mb())
        if floor_mb is not None and lowest < floor_mb:
            proc.kill()
            proc.wait()
            return {"error": f"killed: the machine's available memory fell below {floor_mb:.0f} MB"}
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        return {"error": (stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(stdout.strip().splitlines()[-1])


def compare(row: str, frame_out: Path, ort_out: Path) -> dict:
    """Relative L2 of frame's output against onnxruntime's (pixels: PSNR)."""
    if row == "text":
        a, b = np.load(frame_out), np.load(ort_out)
        return {k: rel_l2(a[k], b[k]) for k in ("hidden", "pooled")}
    a, b = np.load(frame_out), np.load(ort_out)
    if a.dtype == np.uint8:
        seams = overlap_mask(a.shape[0] // 8, a.shape[1] // 8)
        return {"psnr_db": psnr(a, b), "psnr_in_overlaps_db": psnr(a[seams], b[seams]),
                "max_pixel_diff": int(np.abs(a.astype(int) - b.astype(int)).max())}
    return {"rel_l2": rel_l2(a, b)}


def overlap_mask(height: int, width: int, tile: int = 32, overlap: int = 8) -> np.ndarray:
    """Pixels where two tiles are blended (the default tiling of a height x width latent, 8x pixels)."""
    from frame.diffusion.vae.tiles import tile_starts

    def band(size: int) -> np.ndarray:
        marks = np.zeros(size * 8, bool)
        starts = tile_starts(size, tile, overlap)
        for previous, start in zip(starts, starts[1:]):
            marks[start * 8:(previous + tile) * 8] = True
        return marks

    rows, cols = band(height), band(width)
    return rows[:, None] | cols[None, :]


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(f"{np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30):.3g}")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else round(10 * np.log10(255.0 ** 2 / mse), 1)


def folder_for(root: Path, row: str, precision: str) -> Path:
    return root / (f"turbo-{precision}" if row == "turbo" else precision)


def run_row(row: str, precision: str, args: argparse.Namespace, work: Path) -> dict:
    folder = folder_for(args.root, row, precision)
    frame_out = work / f"{row}-{precision}-frame.npy" if row != "text" else work / f"{row}-{precision}-frame.npz"
    results = [measure(row, "frame", folder, frame_out) for _ in range(args.runs)]
    peaks = [r["worker_peak_mb" if row == "turbo" else "peak_mb"] for r in results if "error" not in r]
    summary = {"row": row, "precision": precision, "target_mb": TARGETS_MB[row], "runs": results}
    if peaks:
        summary["frame_peak_mb"] = statistics.median(peaks)
    if row == "vae" and args.runs:
        summary.update(seam_check(precision, folder, frame_out, args, work))
    if args.ort and row != "turbo":
        ort_out = frame_out.with_name(frame_out.name.replace("-frame", "-ort"))
        row_for_ort = "vae-untiled" if row == "vae" else row
        with big_memory_lock(args.lock):
            summary["onnxruntime"] = measure(row_for_ort, "onnxruntime", folder, ort_out, args.ort_floor_mb)
        if "error" not in summary["onnxruntime"] and frame_out.exists():
            summary["frame_vs_onnxruntime"] = compare(row, frame_out, ort_out)
    return summary


def seam_check(precision: str, folder: Path, tiled_out: Path, args: argparse.Namespace, work: Path) -> dict:
    """Tiled frame decode against an untiled decode of the same latent (see ``--seam``)."""
    runtime = "frame" if args.seam == "untiled" else "onnxruntime"
    untiled_out = work / f"vae-{precision}-{'untiled' if runtime == 'frame' else 'ort'}.npy"
    untiled = {"reused": str(untiled_out)}
    if not untiled_out.exists():
        with big_memory_lock(args.lock):
            untiled = measure("vae-untiled", runtime, folder, untiled_out, args.ort_floor_mb)
    result = {f"untiled_{runtime}": untiled}
    if "error" not in untiled and tiled_out.exists():
        result["seam"] = compare("vae", tiled_out, untiled_out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/work/cache/sdxl-full"))
    parser.add_argument("--rows", default="unet1024,unet512,text,vae,turbo")
    parser.add_argument("--precisions", default="fp16,uint8")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ort", action="store_true", help="also run onnxruntime on each row's model")
    parser.add_argument("--ort-floor-mb", type=float, default=2000, help="kill a child below this MemAvailable")
    parser.add_argument("--lock", default=LOCK, help="big-memory lock held around onnxruntime and untiled runs")
    parser.add_argument("--seam", choices=("untiled", "onnxruntime"), default="untiled",
                        help="the VAE row's untiled reference decode: frame's own or onnxruntime's")
    parser.add_argument("--json", type=Path, help="append each row's summary here (JSON lines)")
    parser.add_argument("--work", type=Path, help="keep the outputs here (default: a temporary folder); "
                        "a later run with --runs 0 --ort compares onnxruntime with the kept frame outputs")
    parser.add_argument("--child")
    parser.add_argument("--runtime", default="frame")
    parser.add_argument("--folder")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for row in args.rows.split(","):
            for precision in args.precisions.split(","):
                summary = run_row(row, precision, args, work)
                peak = summary.get("frame_peak_mb")
                verdict = "" if peak is None else ("  OK" if peak <= summary["target_mb"] else "  OVER TARGET")
                print(json.dumps(summary) + verdict, flush=True)
                if args.json:
                    with open(args.json, "a") as handle:
                        handle.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
