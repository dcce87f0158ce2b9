"""``frame engine run`` and ``frame engine info``: run any ONNX model from the shell, or inspect one.

Import-light on purpose: numpy/onnx load inside the handlers.
"""

from __future__ import annotations

import argparse
import logging
import sys

from frame.errors import UsageError

log = logging.getLogger(__name__)

WEIGHTS_CHOICES = ("nocache", "prefetch", "ram", "http")


def register(subparsers) -> None:
    parser = subparsers.add_parser("engine", help="run or inspect ONNX models with frame's streaming engine")
    commands = parser.add_subparsers(dest="engine_command", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser("run", help="run a model on .npy feeds and save its outputs as .npz")
    run.add_argument("source", help=".onnx path, OnnxStream model folder (model.txt) or http(s) URL to either")
    run.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy",
                     help="one model input (repeat for each)")
    run.add_argument("--out", required=True, help="output .npz file (one array per model output)")
    run.add_argument("--weights", default="prefetch", choices=WEIGHTS_CHOICES, help="weights provider")
    run.add_argument("--attention-slices", type=int, default=None, metavar="N",
                     help="query-row slices per attention head (default: from the memory budget)")
    run.add_argument("--attention-budget-mb", type=float, default=16.0, metavar="MB",
                     help="memory for one block of attention scores (default 16)")
    run.set_defaults(func=run_command)

    info = commands.add_parser("info", help="inputs, outputs, op counts, weight bytes, unsupported ops")
    info.add_argument("source", help=".onnx path, OnnxStream model folder (model.txt) or http(s) URL to either")
    info.set_defaults(func=info_command)


def _parse_feeds(specs: list[str]) -> dict:
    import numpy as np

    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--feed expects NAME=FILE.npy, got {spec!r}")
        if name in feeds:
            raise UsageError(f"--feed {name} given twice")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--feed {name}: cannot read {path}: {exc}") from exc
    return feeds


def run_command(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from frame.engine import load_model

    if args.attention_slices is not None and args.attention_slices < 1:
        raise UsageError("--attention-slices must be at least 1")
    feeds = _parse_feeds(args.feed)
    start = time.perf_counter()
    with load_model(args.source, weights=args.weights, attention_slices=args.attention_slices,
                    attention_budget_bytes=int(args.attention_budget_mb * (1 << 20))) as model:
        outputs = model.run(feeds)
    np.savez(args.out, **outputs)
    elapsed = time.perf_counter() - start
    for name, array in outputs.items():
        print(f"{name}: {array.dtype}{list(array.shape)}")
    print(f"saved {args.out} in {elapsed:.2f} s")
    return 0


def _shape(shape) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def info_command(args: argparse.Namespace) -> int:
    from collections import Counter

    from frame.engine import ops  # noqa: F401  (fills the kernel registry)
    from frame.engine.model import read_structure, tensor_info

    structure = read_structure(args.source)
    graph = structure.proto.graph
    weights = structure.weights
    out = sys.stdout
    out.write(f"model: {args.source}\n")
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in structure.proto.opset_import)
    out.write(f"opsets: {opsets}\n")
    for title, values in (("inputs", [v for v in graph.input if v.name not in weights]), ("outputs", graph.output)):
        out.write(f"{title}:\n")
        for value in values:
            info = tensor_info(value)
            out.write(f"  {info.name}: {info.dtype} {_shape(info.shape)}\n")
    total = sum(ref.nbytes for ref in weights.values())
    dtypes = Counter(str(ref.dtype) for ref in weights.values())
    out.write(f"weights: {len(weights)} tensors, {total:,} bytes ({total / 2**20:.1f} MiB; "
              + ", ".join(f"{n} {d}" for d, n in sorted(dtypes.items())) + ")\n")
    counts = Counter(node.op_type for node in structure.nodes)
    out.write(f"nodes: {sum(counts.values())}\n")
    for op_type, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        out.write(f"  {op_type}: {count}\n")
    if structure.problems:
        out.write(f"unsupported: {len(structure.problems)} node(s)\n")
        for problem in structure.problems:
            out.write(f"  {problem}\n")
    else:
        out.write("unsupported: none\n")
    return 0
