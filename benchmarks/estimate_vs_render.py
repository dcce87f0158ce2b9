"""``frame estimate`` against a measured render of the same settings, and the memory model against VmHWM.

Full-size random-weight SD 1.5 (``/work/cache/sd15-full``, exported by
``benchmarks/engine_vs_onnxruntime.py --export-only``) dressed as a diffusers folder in
``<work>/sd15-full-pipeline`` (symlinks, configs as ``benchmarks/sd_memory.py`` writes them); converted
folders (``frame model convert``) are used as they are. Each measurement is its own child process:

* ``estimate``: the estimate for SD 1.5 at 512×512, N steps, euler, guidance 7.5, a queued prompt (no
  taste choice), both per wall second and per CPU second of this process;
* ``render``: the same render through ``frame.diffusion`` (load, text encoder ×2, UNet 2×N, VAE 9
  tiles): wall time and CPU time from process start, VmHWM.

Each run is estimate, render, estimate: the render is compared with the mean of the estimates made
just before and just after it (a shared machine's load changes while a render runs); the medians
over the runs are compared. ``--memory`` also runs each component alone in a fresh child and compares
VmHWM with ``frame.estimate.memory.component_peak``.

    .venv/bin/python benchmarks/estimate_vs_render.py --steps 2 --runs 3
    .venv/bin/python benchmarks/estimate_vs_render.py --pipeline /work/cache/i12-estimate/sd15-full-pipeline-uint8
    .venv/bin/python benchmarks/estimate_vs_render.py --memory --only-memory
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path("/work/cache/i12-estimate")


def assemble(cache: Path, folder: Path) -> Path:
    """A diffusers folder of symlinks to the exported components (as benchmarks/sd_memory.py does)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import sd_memory

    from frame.models import demo_model_path

    demo = demo_model_path()
    for sub in ("scheduler", "tokenizer"):
        shutil.copytree(demo / sub, folder / sub, dirs_exist_ok=True)
    shutil.copy(demo / "model_index.json", folder / "model_index.json")
    for component, config in (("text_encoder", sd_memory.TEXT_CONFIG), ("unet", sd_memory.UNET_CONFIG),
                              ("vae_decoder", sd_memory.VAE_CONFIG)):
        (folder / component).mkdir(parents=True, exist_ok=True)
        (folder / component / "config.json").write_text(json.dumps(config))
        for name in ("model.onnx", "model.onnx_data"):
            target, link = cache / component / name, folder / component / name
            if target.exists() and not link.exists():
                link.symlink_to(target)
    return folder


def _config(pipeline: str, steps: int):
    from dataclasses import replace

    from frame.config import load_config

    config = load_config(None)
    return replace(config, model=replace(config.model, source=pipeline, size="512x512", steps=steps,
                                         sampler="euler", guidance=7.5))


def child_estimate(pipeline: str, steps: int, seconds: float) -> dict:
    from frame.estimate.configured import estimate_config

    out = {}
    for cpu in (False, True):
        result = estimate_config(_config(pipeline, steps), measure_seconds=seconds, texts=0, cpu=cpu)
        here = result.estimate.here
        out["cpu" if cpu else "wall"] = {"total": here.seconds, "phases": here.phases, "step": here.step_seconds}
        out["peak_mb"] = result.estimate.peak_bytes / 2**20
        out["pi_total"] = result.estimate.projections[1].seconds
    return out


def _hwm_mb() -> float:
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024


def child_render(pipeline: str, steps: int, started: float) -> dict:
    import os

    import numpy as np

    from frame.diffusion.configured import engine_weights, load_configured_pipeline
    from frame.estimate.vae import peak_counter

    phases: dict[str, float] = {}
    cpu_phases: dict[str, float] = {}
    marks = {"phase": "load", "at": time.perf_counter(), "cpu": time.process_time()}

    def close_phase() -> None:
        now, cpu = time.perf_counter(), time.process_time()
        phases[marks["phase"]] = phases.get(marks["phase"], 0.0) + now - marks["at"]
        cpu_phases[marks["phase"]] = cpu_phases.get(marks["phase"], 0.0) + cpu - marks["cpu"]
        marks.update(at=now, cpu=cpu)

    def progress(report) -> None:
        if report.phase != marks["phase"]:
            close_phase()
            marks["phase"] = report.phase

    config = _config(pipeline, steps)  # as the render worker loads it: its memory limit, the VAE tiles it counts
    weights = engine_weights(config.model.weights)
    pipe = load_configured_pipeline(config, vae_peak=lambda loaded: peak_counter(loaded, weights))
    pipe.generate(pipe.settings("a lighthouse in a storm, oil painting", negative_prompt="blurry", steps=steps,
                                guidance=7.5, sampler="euler", seed=1, width=512, height=512), callback=progress)
    close_phase()
    times = os.times()
    del np
    return {"wall": time.time() - started, "cpu": times.user + times.system, "phases": phases,
            "cpu_phases": cpu_phases, "peak_mb": _hwm_mb()}


CHILD_COMPONENT = """
import json, sys, numpy as np
from frame.engine import load_model
import frame.diffusion
shapes, items = json.loads(sys.argv[2]), int(sys.argv[3])
feeds = [{k: (np.zeros(v, np.int64) if k == "input_ids" else np.random.default_rng(i).standard_normal(v)
              .astype(np.float32)) for k, v in shapes.items()} for i in range(items)]
with load_model(sys.argv[1]) as m:
    m.run(feeds[0]) if items == 1 else m.run_shared(feeds)
print(json.dumps(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024))
"""


def memory_check(pipeline: Path) -> list[tuple[str, float, float]]:
    from frame.estimate.counting import count_graph
    from frame.estimate.memory import component_peak

    def unet(batch: int) -> dict:
        return {"sample": [batch, 4, 64, 64], "timestep": [1], "encoder_hidden_states": [batch, 77, 768]}

    cases = [("unet batch 1", "unet", unet(1), 1), ("unet shared x2", "unet", unet(1), 2),
             ("unet batch 2", "unet", unet(2), 1),
             ("vae tile 32x32", "vae_decoder", {"latent_sample": [1, 4, 32, 32]}, 1),
             ("text encoder", "text_encoder", {"input_ids": [1, 77]}, 1)]
    rows = []
    for label, component, shapes, items in cases:  # items 2: both guidance passes through run_shared
        source = str(pipeline / component / "model.onnx")
        out = subprocess.run([sys.executable, "-c", CHILD_COMPONENT, source, json.dumps(shapes), str(items)],
                             capture_output=True, text=True, check=True)
        measured = json.loads(out.stdout.strip().splitlines()[-1])
        modelled = component_peak(count_graph(source, shapes), "prefetch", items) / 2**20
        rows.append((label, modelled, measured))
        print(f"  {label:16s} modelled {modelled:6.1f} MB   VmHWM {measured:6.1f} MB   "
              f"({modelled / measured - 1:+.0%})", flush=True)
    return rows


def _mean_estimate(first: dict, second: dict) -> dict:
    """The mean of two estimate results (totals and phases), and both totals for the log."""
    def mean(a: dict, b: dict) -> dict:
        return {"total": (a["total"] + b["total"]) / 2, "step": (a["step"] + b["step"]) / 2,
                "phases": {k: (a["phases"][k] + b["phases"][k]) / 2 for k in a["phases"]},
                "both": (a["total"], b["total"])}

    return {"wall": mean(first["wall"], second["wall"]), "cpu": mean(first["cpu"], second["cpu"]),
            "peak_mb": second["peak_mb"], "pi_total": second["pi_total"]}


def _child(kind: str, pipeline: str, steps: int, seconds: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--pipeline", pipeline, "--steps", str(steps),
                          "--measure-seconds", str(seconds), "--started", str(time.time())],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", type=Path, help="diffusers folder (default: assembled from --cache)")
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/sd15-full"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--measure-seconds", type=float, default=4.0)
    parser.add_argument("--memory", action="store_true", help="also check the memory model per component")
    parser.add_argument("--only-memory", action="store_true")
    parser.add_argument("--child", choices=("estimate", "render"), help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        sys.path.insert(0, str(ROOT))
        pipeline = str(args.pipeline)
        result = (child_estimate(pipeline, args.steps, args.measure_seconds) if args.child == "estimate"
                  else child_render(pipeline, args.steps, args.started))
        print(json.dumps(result))
        return 0
    sys.path.insert(0, str(ROOT))
    pipeline = args.pipeline or assemble(args.cache, WORK / "sd15-full-pipeline")
    print(f"pipeline {pipeline}, 512x512, {args.steps} steps euler, guidance 7.5 (two passes per step)")
    if args.memory or args.only_memory:
        print("memory model vs VmHWM, each component alone in a fresh process (prefetch provider):")
        memory_check(Path(pipeline))
        if args.only_memory:
            return 0
    estimates, renders = [], []
    before = _child("estimate", str(pipeline), args.steps, args.measure_seconds)
    for run in range(args.runs):
        renders.append(_child("render", str(pipeline), args.steps, args.measure_seconds))
        after = _child("estimate", str(pipeline), args.steps, args.measure_seconds)
        estimates.append(_mean_estimate(before, after))
        before = after
        e, r = estimates[-1], renders[-1]
        print(f"run {run + 1}: estimate {e['wall']['total']:.0f} s wall (before/after "
              f"{e['wall']['both'][0]:.0f}/{e['wall']['both'][1]:.0f}) / {e['cpu']['total']:.0f} s CPU "
              f"({e['cpu']['both'][0]:.0f}/{e['cpu']['both'][1]:.0f}), "
              f"render {r['wall']:.0f} s wall / {r['cpu']:.0f} s CPU; peak modelled {e['peak_mb']:.0f} MB, "
              f"VmHWM {r['peak_mb']:.0f} MB", flush=True)
        pairs = (("wall", e["wall"]["phases"], r["phases"]), ("CPU", e["cpu"]["phases"], r["cpu_phases"]))
        for what, est, ren in pairs:
            print(f"    {what:4s} estimate " + ", ".join(f"{k} {v:.0f}" for k, v in est.items())
                  + " | render " + ", ".join(f"{k} {v:.0f}" for k, v in ren.items()), flush=True)
    med = statistics.median
    est_wall, est_cpu = med(e["wall"]["total"] for e in estimates), med(e["cpu"]["total"] for e in estimates)
    ren_wall, ren_cpu = med(r["wall"] for r in renders), med(r["cpu"] for r in renders)
    print(f"median: estimate {est_wall:.0f} s wall vs render {ren_wall:.0f} s ({est_wall / ren_wall - 1:+.0%}); "
          f"estimate {est_cpu:.0f} s CPU vs render {ren_cpu:.0f} s CPU ({est_cpu / ren_cpu - 1:+.0%}); "
          f"peak {med(e['peak_mb'] for e in estimates):.0f} MB modelled vs {med(r['peak_mb'] for r in renders):.0f} "
          f"MB VmHWM; Pi Zero 2 W projection {med(e['pi_total'] for e in estimates) / 60:.0f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
