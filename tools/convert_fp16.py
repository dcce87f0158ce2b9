"""Store an ONNX model's float32 weights as float16, Optimum-style, halving its size on disk.

Every float32 initializer (with at least ``--min-elements`` values) becomes a float16 initializer
``<name>_fp16`` feeding a ``Cast(to=FLOAT)`` whose output keeps the original name, so the graph still
computes in float32 and every consumer is untouched. This is the layout Optimum's fp16 exports use
and what frame's engine widens per op. Tensors with values outside float16's range (|x| > 65504) stay
float32, as do tensors matched by ``--keep``.

Needs only numpy and onnx (no torch), so owners can run it on their own exports:

    python tools/convert_fp16.py unet/model.onnx unet_fp16/model.onnx [--keep 'time_embedding.*']
    python tools/convert_fp16.py in.onnx out.onnx --external      # weights to out.onnx_data

Large models (weights in a side file) are loaded whole by onnx: expect RAM about twice the weights.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

log = logging.getLogger("convert_fp16")
FP16_MAX = float(np.finfo(np.float16).max)
PROTOBUF_LIMIT = 2_000_000_000  # a single .onnx file cannot exceed 2 GB; larger goes external


@dataclass
class Conversion:
    """What ``to_fp16_weights`` changed."""

    converted: list[str] = field(default_factory=list)
    kept_range: list[str] = field(default_factory=list)
    kept_pattern: list[str] = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0


def to_fp16_weights(model: onnx.ModelProto, min_elements: int = 2, keep: re.Pattern | None = None,
                    report: Conversion | None = None) -> onnx.ModelProto:
    """Return a copy of ``model`` with float32 initializers stored as float16 + Cast to float.

    Scalars and tiny tensors (< ``min_elements``) stay float32, like the exporters leave them.
    """
    report = report if report is not None else Conversion()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    taken = {t.name for t in graph.initializer} | {v for n in graph.node for v in (*n.input, *n.output)}
    casts, inits = [], []
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < min_elements:
            inits.append(init)
            continue
        arr = numpy_helper.to_array(init)
        report.bytes_before += arr.nbytes
        if keep is not None and keep.search(init.name):
            report.kept_pattern.append(init.name)
            report.bytes_after += arr.nbytes
            inits.append(init)
            continue
        if arr.size and float(np.max(np.abs(arr))) > FP16_MAX:
            report.kept_range.append(init.name)
            report.bytes_after += arr.nbytes
            inits.append(init)
            continue
        half_name = _unique(f"{init.name}_fp16", taken)
        inits.append(numpy_helper.from_array(arr.astype(np.float16), half_name))
        casts.append(helper.make_node("Cast", [half_name], [init.name], name=_unique(f"{init.name}_cast", taken),
                                      to=TensorProto.FLOAT))
        report.converted.append(init.name)
        report.bytes_after += arr.size * 2
    del graph.initializer[:]
    graph.initializer.extend(inits)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    return out


def _unique(name: str, taken: set[str]) -> str:
    candidate, i = name, 1
    while candidate in taken:
        candidate, i = f"{name}_{i}", i + 1
    taken.add(candidate)
    return candidate


def save(model: onnx.ModelProto, path: Path, external: bool) -> list[Path]:
    """Write the model; weights go to ``<file>_data`` when asked or when they would exceed 2 GB.

    Tensors under 1 KiB stay in the .onnx file: onnxruntime cannot shape-infer through small int64
    shape/axes initializers stored externally.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    weight_bytes = sum(len(t.raw_data) for t in model.graph.initializer)
    if external or weight_bytes > PROTOBUF_LIMIT:
        data = path.with_name(path.name + "_data")
        if data.exists():
            data.unlink()
        onnx.save(model, os.fspath(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=data.name, size_threshold=1024)
        return [path, data]
    onnx.save(model, os.fspath(path))
    return [path]


def convert_file(src: Path, dst: Path, min_elements: int, keep: str | None, external: bool) -> Conversion:
    """Load ``src`` (with its external data), convert, check and save to ``dst``."""
    if src.resolve() == dst.resolve():
        raise SystemExit("convert_fp16: output must differ from input (the input's data file is read lazily)")
    model = onnx.load(os.fspath(src))
    report = Conversion()
    pattern = re.compile(keep) if keep else None
    converted = to_fp16_weights(model, min_elements, pattern, report)
    if not report.converted:
        raise SystemExit(f"convert_fp16: {src} has no float32 initializer with >= {min_elements} values")
    files = save(converted, dst, external)
    onnx.checker.check_model(os.fspath(dst))
    for f in files:
        log.info("wrote %s (%.1f MiB)", f, f.stat().st_size / 2**20)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="input .onnx (external data next to it is read too)")
    parser.add_argument("dst", type=Path, help="output .onnx")
    parser.add_argument("--min-elements", type=int, default=2, help="convert tensors with at least this many values")
    parser.add_argument("--keep", metavar="REGEX", help="keep float32 for initializers whose name matches")
    parser.add_argument("--external", action="store_true", help="store weights in <dst>_data")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.src.is_file():
        parser.error(f"no such file: {args.src}")
    report = convert_file(args.src, args.dst, args.min_elements, args.keep, args.external)
    log.info("converted %d initializers to float16; kept float32: %d out of range, %d by --keep",
             len(report.converted), len(report.kept_range), len(report.kept_pattern))
    for name in report.kept_range:
        log.info("  out of float16 range, kept float32: %s", name)
    log.info("float weights: %.1f MiB -> %.1f MiB", report.bytes_before / 2**20, report.bytes_after / 2**20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
