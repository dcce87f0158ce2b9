"""Dump every count the estimate makes on the test fixtures and the demo model, to compare a refactor.

A change to how the plan is counted (``frame.engine.plan_costs``, the kernels' ``Cost``
declarations) that should not change any number is checked by dumping before and after and
comparing the files byte for byte: every ``StepCost`` field, ``macs_by_op``, the stored and input
bytes, the precision, the peak and ``memory.component_peak`` for four providers and one or two
items, of the engine fixtures at two attention budgets, the graph fixtures as fp32, fp16 and uint8,
and the demo model's four components (and three VAE tiles): 80 counts.

    /work/main/.venv/bin/python tools/dump_counts.py before.json [--models DIR]
    ... change ...
    /work/main/.venv/bin/python tools/dump_counts.py after.json && cmp before.json after.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from frame.convert.files import Options, convert_proto  # noqa: E402
from frame.engine.plan_costs import PlanCosts  # noqa: E402
from frame.estimate import memory  # noqa: E402
from frame.estimate.counting import count_graph  # noqa: E402
from tests.convert.graph_cases import FIXTURES, load_case  # noqa: E402

PROVIDERS = ("prefetch", "ram", "nocache", "http")
DEMO_SHAPES = {"text_encoder": {"input_ids": (1, 77)},
               "unet": {"sample": (2, 4, 50, 84), "timestep": (1,), "encoder_hidden_states": (2, 77, 32)},
               "vae_decoder": {"latent_sample": (1, 4, 50, 84)},
               "vae_encoder": {"sample": (1, 3, 400, 672)}}


def dump(count: PlanCosts) -> dict:
    """Every number of one count, as JSON-ready values."""
    steps = []
    for step in count.steps:
        record = dataclasses.asdict(step)
        record["signature"] = repr(step.signature)
        steps.append(record)
    return {"steps": steps, "macs_by_op": count.macs_by_op, "stored": count.stored_weight_bytes,
            "nodes": count.node_count, "unknown": count.unknown_shapes, "input_bytes": count.input_bytes,
            "precision": count.precision, "peak": count.peak_bytes,
            "component": {p: memory.component_peak(count, p, items) for p in PROVIDERS for items in (1, 2)}}


def counts(models: Path) -> dict[str, dict]:
    """The 80 counts by name (``models``: where the converted graph fixtures are written)."""
    out = {}
    engine = ROOT / "tests" / "fixtures" / "engine"
    for folder in sorted(engine.iterdir()):
        if (folder / "model.onnx").exists() and (folder / "inputs.npz").exists():
            feeds = dict(np.load(folder / "inputs.npz"))
            for budget in (16 << 20, 1 << 16):
                shapes = {k: v.shape for k, v in feeds.items()}
                out[f"{folder.name}@{budget}"] = dump(count_graph(str(folder / "model.onnx"), shapes,
                                                                  attention_budget=budget))
    for case_dir in sorted(FIXTURES.iterdir()):
        case = load_case(case_dir)
        for weights in ("fp32", "fp16", "uint8"):
            model = case.model() if weights == "fp32" else convert_proto(case.model(), Options(weights))
            path = models / f"{case_dir.name}_{weights}.onnx"
            onnx.save(model, path, save_as_external_data=True, location=path.name + "_data", size_threshold=0)
            shapes = {k: v.shape for k, v in case.feeds().items()}
            out[f"graph:{case_dir.name}:{weights}"] = dump(count_graph(str(path), shapes))
    demo = ROOT / "frame" / "models" / "demo"
    for component in sorted(demo.iterdir()):
        model = component / "model.onnx"
        if model.exists():
            out[f"demo:{component.name}"] = dump(count_graph(str(model), DEMO_SHAPES[component.name]))
            if component.name == "vae_decoder":
                for tile in ((16, 16), (32, 48), (64, 64)):
                    out[f"demo:vae:{tile}"] = dump(count_graph(str(model), {"latent_sample": (1, 4, *tile)}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", type=Path, help="where to write the converted graph fixtures (a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = args.models or Path(tmp)
        models.mkdir(parents=True, exist_ok=True)
        result = counts(models)
    args.out.write_text(json.dumps(result, indent=0, sort_keys=True, default=str))
    print(len(result), "counts")


if __name__ == "__main__":
    main()
