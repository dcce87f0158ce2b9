"""Parsing OnnxStream's ``model.txt``: one operation per line, nothing else.

Grammar (OnnxStream's ``Model::next_op``/``parse_tensor_string``; written by its onnx2txt notebook)::

    line    := opname ":" optype "*" "input:" tensors "*" "output:" tensors [ "*" attr (";" attr)* ]
    tensors := tensor (";" tensor)*       an empty tensor is an omitted optional input
    tensor  := name "(" [ type ":" ] dims ")"
    type    := "float32" | "float16" | "int64" | "uint8[" scale "," zero_point "]"
    dims    := "" (a scalar) | int ("," int)*      0 = a dynamic dimension
    attr    := key ":" value                        lists of ints joined by ","

A tensor with a type is a weight: the raw little-endian contents of ``<name>`` (a file in the model's
folder, name ending in ``.bin``). A tensor without a type is a graph input or an intermediate value.
Errors name the line and say what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from frame.engine.errors import ModelFormatError

DTYPES = ("float32", "float16", "int64", "uint8")


@dataclass(frozen=True)
class TensorDecl:
    """One tensor of a line: ``dtype`` is None for values computed by the graph (or fed to it)."""

    name: str
    dims: tuple[int, ...]
    dtype: str | None = None
    scale: float = 0.0  # uint8 weights: value = (q - zero_point) * scale
    zero_point: int = 0

    @property
    def is_weight(self) -> bool:
        return self.dtype is not None


@dataclass(frozen=True)
class OpLine:
    """One operation as written: its inputs keep their positions (None = omitted optional input)."""

    number: int
    name: str
    op_type: str
    inputs: tuple[TensorDecl | None, ...]
    outputs: tuple[TensorDecl, ...]
    attrs: tuple[tuple[str, str], ...]


def parse_model_text(text: str, where: str = "model.txt") -> list[OpLine]:
    """Every operation of a model.txt, in file order; ModelFormatError naming the first bad line."""
    ops = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip("\r")
        if line.strip():
            ops.append(parse_line(line, number, where))
    if not ops:
        raise ModelFormatError(f"{where}: no operations (is it an OnnxStream model.txt?)")
    return ops


def parse_line(line: str, number: int, where: str = "model.txt") -> OpLine:
    def bad(message: str) -> ModelFormatError:
        shown = line if len(line) <= 120 else line[:117] + "..."
        return ModelFormatError(f"{where} line {number}: {message}: {shown!r}")

    fields = line.split("*")
    if len(fields) not in (3, 4):
        raise bad("expected 'name:OpType*input:...*output:...[*attributes]'")
    name, colon, op_type = fields[0].rpartition(":")
    if not colon or not op_type:
        raise bad("the first field must be 'name:OpType'")
    if not fields[1].startswith("input:") or not fields[2].startswith("output:"):
        raise bad("the second and third fields must start with 'input:' and 'output:'")
    try:
        inputs = tuple(_tensor(part) for part in fields[1][6:].split(";"))
        outputs = tuple(_tensor(part) for part in fields[2][7:].split(";"))
        attrs = _attributes(fields[3]) if len(fields) == 4 else ()
    except ValueError as exc:
        raise bad(str(exc)) from None
    if any(o is None for o in outputs):
        raise bad("an output has no name")
    if any(o.is_weight for o in outputs):  # type: ignore[union-attr]
        raise bad("an output cannot be a weights file")
    if inputs == (None,):
        inputs = ()
    return OpLine(number, name or f"#{number}", op_type, inputs, outputs, attrs)  # type: ignore[arg-type]


def _tensor(text: str) -> TensorDecl | None:
    if not text:
        return None
    name, paren, rest = text.partition("(")
    if not paren or not name or not rest.endswith(")") or "(" in rest:
        raise ValueError(f"bad tensor {text!r} (expected name(dims) or name(type:dims))")
    spec = rest[:-1]
    dtype: str | None = None
    scale, zero_point = 0.0, 0
    if ":" in spec:
        dtype, _, spec = spec.partition(":")
        if ":" in spec:
            raise ValueError(f"bad tensor {text!r}")
        if dtype.startswith("uint8[") and dtype.endswith("]"):
            parts = dtype[6:-1].split(",")
            if len(parts) != 2:
                raise ValueError(f"bad uint8 range in {text!r} (expected uint8[scale,zero_point])")
            scale, zero_point, dtype = float(parts[0]), int(parts[1]), "uint8"
            if not 0 <= zero_point <= 255:
                raise ValueError(f"uint8 zero point {zero_point} outside 0..255 in {text!r}")
        elif dtype not in DTYPES or dtype == "uint8":
            raise ValueError(f"unsupported weight type {dtype!r} in {text!r} "
                             "(float32, float16, int64 or uint8[scale,zero_point])")
    dims = tuple(int(d) for d in spec.split(",")) if spec else ()
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in {text!r}")
    return TensorDecl(name, dims, dtype, scale, zero_point)


def _attributes(text: str) -> tuple[tuple[str, str], ...]:
    attrs = []
    for pair in text.split(";"):
        key, colon, value = pair.partition(":")
        if not colon or not key or ":" in value:
            raise ValueError(f"bad attribute {pair!r} (expected key:value)")
        attrs.append((key, value))
    return tuple(attrs)
