"""``frame model convert SRC DST --weights fp16|uint8``: smaller weights for a model folder or file.

Import-light: numpy/onnx load inside the handler.
"""

from __future__ import annotations

import argparse
import re
import sys

from frame.errors import UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser("model", help="convert ONNX models (fp16 or 8-bit weights)")
    commands = parser.add_subparsers(dest="model_command", metavar="COMMAND")
    commands.required = True
    convert = commands.add_parser(
        "convert", help="write a copy of a model with float16 or 8-bit weights",
        description="Convert a diffusers ONNX export folder (every .onnx converted, other files copied) or a "
                    "single .onnx file (weights written to DST_data beside it). fp16: float16 weights, float32 "
                    "inputs/outputs and compute. uint8: 8-bit weights per output channel as standard "
                    "DequantizeLinear (activations stay float32). The result runs in frame and in onnxruntime. "
                    "DST must not exist; it appears only when complete.")
    convert.add_argument("src", metavar="SRC", help="diffusers ONNX folder or .onnx file")
    convert.add_argument("dst", metavar="DST", help="new folder or .onnx file")
    convert.add_argument("--weights", required=True, choices=("fp16", "uint8"), help="weight precision to write")
    convert.add_argument("--keep", metavar="REGEX",
                         help="leave initializers whose name matches REGEX unchanged")
    convert.add_argument("--dynamic-shapes", action="store_true",
                         help="make models exported at a fixed image size (e.g. a VAE decoder with a static "
                              "1x4x64x64 input) run at any size, so the VAE can be decoded in tiles")
    convert.set_defaults(func=convert_command)


def convert_command(args: argparse.Namespace) -> int:
    from frame.convert.files import Options, convert
    from frame.convert.policy import Policy

    try:
        keep = re.compile(args.keep) if args.keep else None
    except re.error as exc:
        raise UsageError(f"--keep: not a regular expression: {exc}") from exc
    transform = None
    if args.dynamic_shapes:
        from frame.engine.dynamic_shapes import make_dynamic as transform
    options = Options(args.weights, policy=Policy(keep=keep), transform=transform)
    reports = convert(args.src, args.dst, options)
    before = sum(r.bytes_before for r in reports.values())
    after = sum(r.bytes_after for r in reports.values())
    for name, report in reports.items():
        kept = f", {len(report.kept)} kept ({_reasons(report.kept)})" if report.kept else ""
        print(f"{name}: {len(report.converted)} weights to {args.weights}{kept}; "
              f"{report.bytes_before / 1e6:.1f} MB -> {report.bytes_after / 1e6:.1f} MB")
    print(f"wrote {args.dst}: weights {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB", file=sys.stdout)
    return 0


def _reasons(kept: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for reason in kept.values():
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
