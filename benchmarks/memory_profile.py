"""Where a model's peak memory goes, step by step: the high-water mark of every engine step.

A diagnostic for the memory rows of issue 11 (not a target by itself). The model runs once in this
process; after every step the executor's ``after_step`` hook reads the process's ``VmHWM`` (then
resets it through ``/proc/self/clear_refs``, so each figure is that step's own peak), the RSS left
after the step's frees, and the bytes of the activations still alive in the run's environment
(distinct buffers). The gap between a step's peak and the live activations is that kernel's working
memory (column bands, attention blocks, decoded weight blocks) plus whatever the process keeps
outside the run (Python, numpy, the weight read-ahead).

    .venv/bin/python benchmarks/memory_profile.py MODEL.onnx --feeds unet-sd15 [--top 15]
    .venv/bin/python benchmarks/memory_profile.py /work/cache/sdxl-full/uint8/unet/model.onnx --feeds unet-sdxl:128

``--feeds``: unet-sd15[:LATENT], unet-sdxl[:LATENT], vae[:LATENT] (square latent side), text[:VOCAB].
``--render``: MODEL is a pipeline folder; one render (``--size``, ``--steps``, ``--guidance``) with every
component the pipeline loads profiled, plus the RSS at each load (what earlier phases left behind).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_high_water() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def live_bytes(env: dict) -> int:
    """Bytes of the distinct buffers behind the arrays in ``env`` (views counted once, by base)."""
    seen: dict[int, int] = {}
    for value in env.values():
        if not isinstance(value, np.ndarray):
            continue
        base = value
        while isinstance(base.base, np.ndarray):
            base = base.base
        seen[id(base)] = base.nbytes
    return sum(seen.values())


def make_feeds(kind: str) -> dict[str, np.ndarray]:
    name, _, size = kind.partition(":")
    rng = np.random.default_rng(0)
    if name == "text":
        vocab = int(size or 49408)
        ids = rng.integers(1, vocab - 2, (1, 77)).astype(np.int32)
        ids[0, 0], ids[0, 20:] = vocab - 2, vocab - 1
        return {"input_ids": ids}
    side = int(size or (128 if name == "unet-sdxl" else 64))
    if name == "vae":
        return {"latent_sample": rng.standard_normal((1, 4, side, side)).astype(np.float32)}
    context = 2048 if name == "unet-sdxl" else 768
    feeds = {"sample": rng.standard_normal((1, 4, side, side)).astype(np.float32),
             "timestep": np.array([999.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((1, 77, context)).astype(np.float32)}
    if name == "unet-sdxl":
        feeds["text_embeds"] = rng.standard_normal((1, 1280)).astype(np.float32)
        pixels = float(side * 8)
        feeds["time_ids"] = np.array([[pixels, pixels, 0, 0, pixels, pixels]], np.float32)
    return feeds


@dataclass
class StepRecord:
    index: int
    op: str
    name: str
    peak_mb: float
    rss_after_mb: float
    live_mb: float


def profile(path: str, feeds: dict[str, np.ndarray], weights: str = "prefetch") -> tuple[list[StepRecord], dict]:
    """Run ``path`` once and return one record per step plus a summary."""
    from frame.engine import load_model

    model = load_model(path, weights=weights)
    inputs = {i.name for i in model.inputs}
    feeds = {k: v for k, v in feeds.items() if k in inputs}
    records: list[StepRecord] = []
    steps = model.steps

    def after_step(i: int, env: dict) -> None:
        node = steps[i].node
        records.append(StepRecord(i, node.op_type, node.name, status_mb("VmHWM"), status_mb("VmRSS"),
                                  live_bytes(env) / 2**20))
        reset_high_water()

    model._executor.after_step = after_step
    before = status_mb("VmRSS")
    reset_high_water()
    model.run(feeds)
    summary = {"rss_before_run_mb": round(before, 1), "steps": len(records),
               "peak_mb": round(max(r.peak_mb for r in records), 1),
               "max_live_mb": round(max(r.live_mb for r in records), 1)}
    model.close()
    return records, summary


def profile_render(folder: str, size: int, steps: int, guidance: float, weights: str
                   ) -> tuple[list[StepRecord], list[dict]]:
    """One pipeline render; records of every step of every component, tagged by component."""
    from frame.diffusion import load_pipeline
    from frame.engine import load_model

    records: list[StepRecord] = []
    loads: list[dict] = []

    def loader(source: str):
        component = Path(str(source)).parent.name
        loads.append({"component": component, "rss_at_load_mb": round(status_mb("VmRSS"), 1)})
        model = load_model(source, weights=weights)
        steps_ = model.steps
        loads[-1]["rss_after_load_mb"] = round(status_mb("VmRSS"), 1)

        def after_step(i: int, env: dict) -> None:
            node = steps_[i].node
            records.append(StepRecord(i, node.op_type, f"{component}:{node.name}", status_mb("VmHWM"),
                                      status_mb("VmRSS"), live_bytes(env) / 2**20))
            reset_high_water()

        model._executor.after_step = after_step
        return model

    pipe = load_pipeline(folder, loader=loader)
    pipe.generate(pipe.settings("a lighthouse in a storm, oil painting", steps=steps, guidance=guidance, seed=1,
                                width=size, height=size))
    loads.append({"component": "end", "rss_at_load_mb": round(status_mb("VmRSS"), 1)})
    return records, loads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--feeds", default="unet-sd15")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--weights", default="prefetch")
    parser.add_argument("--json", help="write every step's record here")
    parser.add_argument("--render", action="store_true")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--guidance", type=float, default=7.5)
    args = parser.parse_args()
    if args.render:
        records, loads = profile_render(args.model, args.size, args.steps, args.guidance, args.weights)
        for entry in loads:
            print(json.dumps(entry))
        for component in dict.fromkeys(r.name.split(":")[0] for r in records):
            mine = [r for r in records if r.name.startswith(component + ":")]
            print(json.dumps({"component": component, "peak_mb": round(max(r.peak_mb for r in mine), 1),
                              "max_live_mb": round(max(r.live_mb for r in mine), 1)}))
    else:
        records, summary = profile(args.model, make_feeds(args.feeds), args.weights)
        print(json.dumps(summary))
    print(f"{'step':>5} {'op':<16} {'peak MB':>8} {'after MB':>9} {'live MB':>8}  node")
    for r in sorted(records, key=lambda r: -r.peak_mb)[:args.top]:
        print(f"{r.index:>5} {r.op:<16} {r.peak_mb:>8.1f} {r.rss_after_mb:>9.1f} {r.live_mb:>8.1f}  {r.name[:70]}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in records]))


if __name__ == "__main__":
    main()
