"""``frame engine run`` and ``frame engine info``: run any ONNX model from the shell, or inspect one.

Import-light on purpose: numpy/onnx load inside the handlers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import get_args

from frame.config.schema import WeightsName
from frame.errors import UsageError

log = logging.getLogger(__name__)

# frame.engine.providers.provider_names(), not imported here: the registry needs numpy and `frame --help`
# imports every command module. So: the schema's names ("auto" aside) and the one provider no owner
# names, "http" (tests/engine/test_provider_registry.py keeps this equal to the registry)
WEIGHTS_CHOICES = (*(name for name in get_args(WeightsName) if name != "auto"), "http")


def register(subparsers) -> None:
    parser = subparsers.add_parser("engine", help="run or inspect ONNX models with frame's streaming engine")
    commands = parser.add_subparsers(dest="engine_command", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser("run", help="run a model on .npy, image or WAV inputs; print (and save) its outputs")
    run.add_argument("source", help=".onnx path, OnnxStream model folder (model.txt) or http(s) URL to either")
    run.add_argument("--input", "--feed", dest="feed", action="append", default=[], metavar="NAME=FILE",
                     help="one model input from FILE.npy, an image (.png, .jpg, ...) or .wav (repeat for each)")
    run.add_argument("--save", "--out", dest="out", metavar="OUT.npz", help="save the outputs (one array each)")
    run.add_argument("--size", metavar="HxW", help="resize images to this size (default: the model's fixed dims)")
    run.add_argument("--mean", default="0", metavar="M[,M,M]", help="subtract per channel after scaling to [0, 1]")
    run.add_argument("--std", default="1", metavar="S[,S,S]", help="then divide per channel")
    run.add_argument("--bgr", action="store_true", help="feed images as BGR (OpenCV/PaddlePaddle models)")
    run.add_argument("--layout", choices=("nchw", "nhwc"), help="image layout (default: from the declared shape)")
    run.add_argument("--sample-rate", type=int, metavar="HZ", help="resample WAV audio to this rate")
    run.add_argument("--top", type=int, default=5, metavar="K", help="print the K largest values of each output")
    run.add_argument("--weights", default="prefetch", choices=WEIGHTS_CHOICES, help="weights provider")
    run.add_argument("--attention-slices", type=int, default=None, metavar="N",
                     help="query-row slices per attention head (default: from the memory budget)")
    run.add_argument("--attention-budget-mb", type=float, default=16.0, metavar="MB",
                     help="memory for one block of attention scores (default 16)")
    run.set_defaults(func=run_command)

    info = commands.add_parser("info", help="inputs, outputs, op counts, weight bytes, unsupported ops")
    info.add_argument("source", help=".onnx path, OnnxStream model folder (model.txt) or http(s) URL to either")
    info.set_defaults(func=info_command)


def _parse_feeds(specs: list[str], model, options) -> dict:
    from frame.cli.engine_inputs import load_input

    declared = {info.name: info for info in model.inputs}
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input expects NAME=FILE, got {spec!r}")
        if name in feeds:
            raise UsageError(f"--input {name} given twice")
        if name not in declared:
            raise UsageError(f"--input {name}: the model has no input {name!r} (inputs: {', '.join(declared)})")
        feeds[name] = load_input(path, declared[name], options)
    missing = [name for name in declared if name not in feeds]
    if missing:
        raise UsageError(f"missing --input for {', '.join(missing)}: give each model input as --input NAME=FILE "
                         f"(the model's inputs: {', '.join(declared)}; see frame engine info)")
    return feeds


def _input_options(args: argparse.Namespace):
    from frame.cli.engine_inputs import InputOptions, parse_floats, parse_size

    return InputOptions(size=parse_size(args.size) if args.size else None, mean=parse_floats(args.mean, "--mean"),
                        std=parse_floats(args.std, "--std"), bgr=args.bgr, layout=args.layout,
                        sample_rate=args.sample_rate)


def run_command(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from frame.cli.engine_inputs import describe_output
    from frame.engine import load_model

    if args.attention_slices is not None and args.attention_slices < 1:
        raise UsageError("--attention-slices must be at least 1")
    if args.out:
        from frame.atomicfile import unwritable_reason

        reason = unwritable_reason(args.out)
        if reason:
            raise UsageError(f"--save {args.out}: {reason}")
    options = _input_options(args)
    start = time.perf_counter()
    with load_model(args.source, weights=args.weights, attention_slices=args.attention_slices,
                    attention_budget_bytes=int(args.attention_budget_mb * (1 << 20))) as model:
        feeds = _parse_feeds(args.feed, model, options)
        outputs = model.run(feeds)
    elapsed = time.perf_counter() - start
    for name, array in outputs.items():
        print(describe_output(name, array, args.top))
    if args.out:
        np.savez(args.out, **outputs)
        print(f"saved {args.out} in {elapsed:.2f} s")
    else:
        print(f"ran in {elapsed:.2f} s")
    return 0


def _shape(shape) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def info_command(args: argparse.Namespace) -> int:
    from collections import Counter

    from frame.engine import ops  # noqa: F401  (fills the kernel registry)
    from frame.engine.model import read_structure, tensor_info
    from frame.engine.subgraphs import node_bodies

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
    counts: Counter = Counter()

    def count(nodes) -> None:  # If/Loop/Scan bodies included
        for node in nodes:
            counts[node.op_type] += 1
            for body in node_bodies(node):
                count(body.nodes)

    count(structure.nodes)
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
