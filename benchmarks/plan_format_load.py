"""Decoding a kept model plan (``frame.engine.plan_format``) at SDXL-like size, against the pickle it replaced.

No full-size SDXL export is needed: the 8-bit tiny SDXL UNet fixture's plan is decoded ``--copies``
times into distinct objects and joined into one plan of about the real UNet's step count (7 copies:
8,645 steps, a 6.4 MB tree, against the real UNet's 4.7 MB pickle). Printed: CPU seconds (median of
``--runs``) and the traced peak of ``plan_format.decode`` and of the old ``PlanUnpickler`` (read
from git, ``--old-ref``) on the same plan; the file reading and the executor binding are not in it.

    PYTHONPATH=. .venv/bin/python benchmarks/plan_format_load.py --copies 7 --runs 5
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNET = ROOT / "tests" / "fixtures" / "pipelines" / "sdxl" / "model" / "unet" / "model.onnx"


def _old_module(ref: str, folder: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:frame/engine/plan_cache.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(folder) / "old_plan_cache.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_plan_cache", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_plan_cache"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _cpu(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _peak(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old-ref", default="ae29db1", help="a commit whose plan_cache.py pickles")
    args = parser.parse_args(argv)
    from frame.convert.files import Options, convert
    from frame.engine import plan_format
    from frame.engine.model import plan_structure, read_structure
    from frame.engine.passes.sliced_attention import AttentionConfig

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "unet" / "model.onnx"
        source.parent.mkdir()
        with contextlib.redirect_stderr(io.StringIO()):
            convert(UNET, source, Options("uint8"))
        attention = AttentionConfig(None, 16 << 20)
        tree, arrays = plan_format.encode(plan_structure(read_structure(str(source)), attention), attention)
        big = plan_format.decode(tree, memoryview(arrays), attention)
        for i in range(args.copies - 1):
            more = plan_format.decode(tree, memoryview(arrays), attention)
            big.steps.extend(more.steps)
            big.weights.update({f"{name}#{i}": ref for name, ref in more.weights.items()})
        tree, arrays = plan_format.encode(big, attention)
        old = _old_module(args.old_ref, folder)
        buffer = io.BytesIO()
        old.PlanPickler(buffer, attention).dump(big)
        pickled = buffer.getvalue()

        def new_load():
            return plan_format.decode(tree, memoryview(arrays), attention)

        def old_load():
            return old.PlanUnpickler(io.BytesIO(pickled), attention).load()

        new_cpu, old_cpu = _cpu(new_load, args.runs), _cpu(old_load, args.runs)
        print(f"plan: {len(big.steps)} steps; data-only {len(tree) / 1e6:.2f} MB tree + {len(arrays)} array bytes, "
              f"pickle {len(pickled) / 1e6:.2f} MB")
        print(f"data-only decode: {new_cpu:.3f} s CPU, traced peak {_peak(new_load):.1f} MB")
        print(f"old unpickling:   {old_cpu:.3f} s CPU, traced peak {_peak(old_load):.1f} MB")
        print(f"data-only / pickle (CPU): {new_cpu / old_cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
