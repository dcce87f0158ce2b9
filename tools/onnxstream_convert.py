"""Write an ONNX model as an OnnxStream model folder: ``model.txt`` plus one raw ``.bin`` per weight.

Follows the format as OnnxStream's onnx2txt notebook writes it (its published description; no code of
it is used here):

* shapes come from ONNX shape inference; a symbolic dimension is written as 0 (dynamic);
* ``Constant`` nodes are folded into weights; names are escaped (``.`` → ``_2E_``, see
  ``frame.engine.onnxstream.names``) and a weight's file is its escaped name plus ``.bin``;
* an int64 weight at ``Mul`` input 1 is stored as float32; Gemm weights with ``transA``/``transB`` are
  stored transposed (``_transposed``) and the flag is dropped; Conv weights are stored as
  ``<name>_nhwc.bin`` (O, kH, kW, I) and referenced as ``<name>_nchw.bin`` (``--conv both`` writes
  both files, as the notebook does; ``nhwc`` only what OnnxStream's downloader fetches);
* ``--precision fp16``: float32 weights as float16; ``qu8``: float32 weights as uint8 with one scale
  and zero point per tensor from the 0.1 % / 99.9 % percentiles (a range on one side of 0 is widened
  to 0, ``scale = (hi - lo) / 255``, ``zero = int(|lo| / scale)``, values truncated after clipping to
  0..255), except Conv biases, InstanceNormalization scale/bias and Resize scales; a one-value tensor
  is stored as the byte 1 with ``scale = |v|`` and zero point 0 (v ≥ 0) or 2.

Dev-only helper for tests and owners with their own exports (numpy + onnx):

    python tools/onnxstream_convert.py unet/model.onnx unet_fp16/ --precision fp16
    python tools/onnxstream_convert.py vae/model.onnx vae_32/ --fixed-input latent_sample=1,4,32,32
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frame.engine.onnxstream.names import escape  # noqa: E402

PRECISIONS = ("fp32", "fp16", "qu8")
CONV_FILES = ("both", "nhwc", "nchw")


def quantize(a: np.ndarray, op_type: str, position: int) -> tuple[np.ndarray, str]:
    """(stored array, type text) for a float32 weight under OnnxStream's per-tensor uint8 scheme."""
    if (op_type == "Conv" and position == 2) or (op_type == "InstanceNormalization" and position != 0) \
            or (op_type == "Resize" and position == 2):
        return a, "float32"
    flat = a.reshape(-1)
    finite = np.sort(flat[np.isfinite(flat)].astype(np.float64))
    if finite.size == 1 and flat.size == 1:
        value = float(flat[0])
        return np.ones(a.shape, np.uint8), f"uint8[{abs(value)!r},{0 if value >= 0 else 2}]"
    if finite.size < 2:
        return a, "float32"
    left = float(finite[int(finite.size * 0.001)])
    right = float(finite[int(finite.size * 0.001 * -1 - 1)])
    if left > 0 and right > 0:
        left = 0.0
    elif left < 0 and right < 0:
        right = 0.0
    if not right > left:
        return a, "float32"
    scale = (right - left) / 255.0
    zero = min(int(abs(left) / scale), 255)
    stored = np.clip(a.astype(np.float64) / scale + zero, 0, 255).astype(np.uint8)
    return stored, f"uint8[{scale!r},{zero}]"


class Converter:
    """One model's conversion; ``run`` writes the folder."""

    def __init__(self, model: onnx.ModelProto, dest: Path, precision: str = "fp32", conv: str = "both") -> None:
        if precision not in PRECISIONS or conv not in CONV_FILES:
            raise ValueError(f"precision must be one of {PRECISIONS}, conv one of {CONV_FILES}")
        self.model = onnx.shape_inference.infer_shapes(model)
        self.dest = dest
        self.precision = precision
        self.conv = conv
        graph = self.model.graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.constants: dict[str, onnx.TensorProto] = {}
        self.shapes = {v.name: v for v in graph.value_info}
        self.inputs = {v.name: v for v in graph.input}
        self.outputs = {v.name: v for v in graph.output}

    def run(self) -> list[str]:
        """Write model.txt and the weights; returns the model.txt lines."""
        self.dest.mkdir(parents=True, exist_ok=True)
        for old in self.dest.glob("*.bin"):
            old.unlink()
        lines = []
        for node in self.model.graph.node:
            if node.op_type == "Constant" and len(node.output) == 1:
                value = next((a for a in node.attribute if a.name == "value"), None)
                if value is None or value.type != onnx.AttributeProto.TENSOR:
                    raise ValueError(f"Constant {node.name!r}: only tensor 'value' constants are supported")
                self.constants[node.output[0]] = value.t
                continue
            if not node.input or not node.output:
                raise ValueError(f"node {node.name!r} ({node.op_type}) has no inputs or no outputs")
            lines.append(self.line(node))
        (self.dest / "model.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return lines

    def line(self, node: onnx.NodeProto) -> str:
        inputs = [self.tensor(name, node, i) if name else "" for i, name in enumerate(node.input)]
        outputs = [self.tensor(name, node, -i - 1) for i, name in enumerate(node.output)]
        fields = [f"{node.name}:{node.op_type}", "input:" + ";".join(inputs), "output:" + ";".join(outputs)]
        attrs = [f"{a.name}:{attribute_text(a)}" for a in node.attribute]
        if attrs:
            fields.append(";".join(attrs))
        if any("*" in f for f in fields):
            raise ValueError(f"node {node.name!r}: '*' in a name cannot be written to model.txt")
        return "*".join(fields)

    def tensor(self, name: str, node: onnx.NodeProto, position: int) -> str:
        weight = self.initializers.get(name) or self.constants.get(name)
        if weight is not None and position >= 0:
            return self.weight(name, weight, node, position)
        info = self.shapes.get(name) or self.inputs.get(name) or self.outputs.get(name)
        if info is None:
            raise ValueError(f"no shape for {name!r} (node {node.name!r}): shape inference did not reach it")
        dims = ",".join(str(d.dim_value) for d in info.type.tensor_type.shape.dim)
        return f"{escape(name)}({dims})"

    def weight(self, value: str, tensor: onnx.TensorProto, node: onnx.NodeProto, position: int) -> str:
        a = numpy_helper.to_array(tensor)
        if node.op_type == "Mul" and position == 1 and a.dtype == np.int64:
            a = a.astype(np.float32)
        if self.precision == "fp16" and a.dtype == np.float32:
            a = a.astype(np.float16)
        if a.dtype not in (np.float32, np.float16, np.int64):
            raise ValueError(f"weight {value!r}: dtype {a.dtype} (OnnxStream stores float32/float16/int64)")
        kind = str(a.dtype)
        if self.precision == "qu8" and a.dtype == np.float32:
            a, kind = quantize(a, node.op_type, position)
        name = escape(value)
        if node.op_type == "Gemm":
            name, a = self._gemm(node, position, name, a)
        elif node.op_type == "Conv" and position in (0, 1):
            if a.ndim == 3:
                a = a[..., np.newaxis]
            if self.conv in ("both", "nhwc"):
                self._save(name + "_nhwc", np.transpose(a, (0, 2, 3, 1)))
            name += "_nchw"
            if self.conv == "nhwc":
                return f"{name}.bin({kind}:{','.join(map(str, a.shape))})"
        self._save(name, a)
        return f"{name}.bin({kind}:{','.join(map(str, a.shape))})"

    def _gemm(self, node: onnx.NodeProto, position: int, name: str, a: np.ndarray) -> tuple[str, np.ndarray]:
        flag = {0: "transA", 1: "transB"}.get(position)
        attr = next((x for x in node.attribute if x.name == flag and x.i != 0), None)
        if attr is None:
            return name, a
        node.attribute.remove(attr)
        return name + "_transposed", np.transpose(a)

    def _save(self, stem: str, a: np.ndarray) -> None:
        np.ascontiguousarray(a).tofile(self.dest / f"{stem}.bin")


def attribute_text(a: onnx.AttributeProto) -> str:
    if a.type == onnx.AttributeProto.INT:
        return str(a.i)
    if a.type == onnx.AttributeProto.FLOAT:
        return str(a.f)
    if a.type == onnx.AttributeProto.STRING:
        return a.s.decode("utf-8", errors="ignore")
    if a.type == onnx.AttributeProto.INTS:
        return ",".join(str(x) for x in a.ints)
    if a.type == onnx.AttributeProto.TENSOR:
        values = numpy_helper.to_array(a.t).flatten().tolist()
        if len(values) != 1:
            raise ValueError(f"tensor attribute {a.name!r} with {len(values)} values")
        return str(values[0])
    raise ValueError(f"attribute {a.name!r} of type {onnx.AttributeProto.AttributeType.Name(a.type)}")


def rename_values(model: onnx.ModelProto, names: dict[str, str]) -> None:
    """Rename graph values everywhere (graph inputs/outputs, node inputs/outputs, value_info)."""
    graph = model.graph
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.name = names.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]


def fix_input_dims(model: onnx.ModelProto, dims: dict[str, list[int]]) -> None:
    """Make graph inputs static (e.g. a 32×32-latent VAE tile decoder); shape inference then fills in."""
    for value in model.graph.input:
        if value.name in dims:
            shape = value.type.tensor_type.shape
            for dim, size in zip(shape.dim, dims[value.name]):
                dim.Clear()
                dim.dim_value = size
    del model.graph.value_info[:]


def convert(source: str | os.PathLike | onnx.ModelProto, dest: str | os.PathLike, precision: str = "fp32",
            conv: str = "both", rename: dict[str, str] | None = None,
            fixed_inputs: dict[str, list[int]] | None = None) -> Path:
    """Convert one ONNX model (path or proto, external data loaded) into the folder ``dest``."""
    model = source if isinstance(source, onnx.ModelProto) else onnx.load(os.fspath(source))
    model = onnx.ModelProto.FromString(model.SerializeToString())
    if rename:
        rename_values(model, rename)
    if fixed_inputs:
        fix_input_dims(model, fixed_inputs)
    Converter(model, Path(dest), precision, conv).run()
    return Path(dest)


def weight_count(folder: Path) -> int:
    return math.prod([len(list(folder.glob("*.bin")))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("onnx", help="input .onnx file")
    parser.add_argument("dest", help="output folder (model.txt + .bin files)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
    parser.add_argument("--conv", choices=CONV_FILES, default="both", help="which conv weight files to write")
    parser.add_argument("--rename", action="append", default=[], metavar="OLD=NEW", help="rename a graph value")
    parser.add_argument("--fixed-input", action="append", default=[], metavar="NAME=D0,D1,...",
                        help="make an input static before shape inference")
    args = parser.parse_args(argv)
    rename = dict(spec.split("=", 1) for spec in args.rename)
    fixed = {n: [int(d) for d in dims.split(",")] for n, dims in (s.split("=", 1) for s in args.fixed_input)}
    dest = convert(args.onnx, args.dest, args.precision, args.conv, rename, fixed)
    print(f"wrote {dest}/model.txt and {weight_count(dest)} weight files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
