"""``frame model convert SRC DST --weights fp16|uint8``: smaller weights for a model folder or file.

Import-light: numpy/onnx load inside the handler.
"""

from __future__ import annotations

import argparse
import re
import sys

from frame.cli import model_import
from frame.errors import UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser("model", help="import checkpoints, convert ONNX models (fp16 or 8-bit weights)")
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
    convert.add_argument("--lora", metavar="FILE:SCALE", action="append", default=[],
                         help="merge a LoRA (.safetensors, kohya or diffusers) into the weights at SCALE "
                              "(default 1), for a fixed style; repeat for several")
    convert.set_defaults(func=convert_command)
    check = commands.add_parser(
        "lora-check", help="say which layers of a model a LoRA file changes and which of its keys match nothing",
        description="Read a LoRA .safetensors file (kohya/A1111 or diffusers/PEFT keys) and match it against the "
                    "model's graphs (UNet and text encoders of a diffusers ONNX folder, or one .onnx file), "
                    "as a render would; keys that match nothing are listed.")
    check.add_argument("lora", metavar="FILE", help="LoRA .safetensors file")
    check.add_argument("--model", help="model folder or .onnx file (default: model.source from the configuration)")
    check.set_defaults(func=lora_check_command)
    model_import.register(commands)


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
    options = Options(args.weights, policy=Policy(keep=keep), transform=transform,
                      loras=tuple(_lora_argument(text) for text in args.lora))
    reports = convert(args.src, args.dst, options)
    before = sum(r.bytes_before for r in reports.values())
    after = sum(r.bytes_after for r in reports.values())
    for name, report in reports.items():
        kept = f", {len(report.kept)} kept ({_reasons(report.kept)})" if report.kept else ""
        print(f"{name}: {len(report.converted)} weights to {args.weights}{kept}; "
              f"{report.bytes_before / 1e6:.1f} MB -> {report.bytes_after / 1e6:.1f} MB")
    print(f"wrote {args.dst}: weights {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB", file=sys.stdout)
    return 0


def _lora_argument(text: str):
    from frame.engine.lora import read_checked

    path, _, scale = text.rpartition(":")
    try:
        value = float(scale) if path else 1.0
    except ValueError:
        path, value = text, 1.0
    return read_checked(path or text), value


def lora_check_command(args: argparse.Namespace) -> int:
    """Exit 0 when every LoRA key changes a layer, 1 when some match nothing (listed)."""
    from pathlib import Path

    from frame.engine.lora import LoraUse, match_loras, read_checked
    from frame.engine.model import read_structure

    lora = read_checked(args.lora)  # malformed or non-finite: one line naming the file
    source = args.model
    if source is None:
        from frame.config.loader import load_config
        from frame.models import resolve_model_source

        source = resolve_model_source(load_config(getattr(args, "config", None)).model.source)
    root = Path(source)
    files = {c: root / c / "model.onnx" for c in lora.components} if root.is_dir() else {"unet": root}
    missing = 0
    for component, modules in sorted(lora.components.items()):
        path = files.get(component)
        if path is None or not path.is_file():
            print(f"{component}: {len(modules)} module(s), but the model has no {component}")
            missing += len(modules)
            continue
        structure = read_structure(str(path))
        _, report = match_loras(structure.nodes, structure.weights, [LoraUse(lora.name, modules, 1.0)])
        print(f"{component} ({path}):")
        for line in report.lines():
            print(f"  {line}")
        missing += sum(len(v) for v in report.unmatched.values())
    for key in lora.unsupported:
        print(f"unsupported key (not applied): {key}")
    print(f"{lora.path}: " + ("every module matches a layer" if not missing and not lora.unsupported
                              else f"{missing + len(lora.unsupported)} key(s) match nothing"))
    return 0 if not missing and not lora.unsupported else 1


def _reasons(kept: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for reason in kept.values():
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
