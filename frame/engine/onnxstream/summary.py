"""What a model.txt says without building a graph: I/O names and shapes, weight types and files.

The SD pipeline uses it to map a published folder's graph inputs and outputs to the names it feeds
and reads, ``frame config check`` to say what precision a folder holds, and tests to list the
files a folder must contain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.sources import SourcePool
from frame.engine.onnxstream.build import weight_bytes
from frame.engine.onnxstream.names import unescape
from frame.engine.onnxstream.source import model_txt_location, read_text
from frame.engine.onnxstream.text import OpLine, parse_model_text


@dataclass(frozen=True)
class ModelSummary:
    """Graph inputs/outputs as ``(unescaped name, dims)`` (0 = dynamic) and weight statistics."""

    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    values: frozenset[str]
    weight_types: dict[str, int]  # "float16" → bytes of weights stored as float16
    weight_bytes: int
    op_types: dict[str, int]
    downsamplings: int  # Conv ops with stride 2: a UNet's levels - 1

    @property
    def precision(self) -> str:
        """The weight type holding most bytes (int64 shape constants aside): uint8, float16 or float32."""
        floats = {k: v for k, v in self.weight_types.items() if k != "int64"}
        return max(floats, key=floats.get) if floats else "none"


def summarize(ops: list[OpLine]) -> ModelSummary:
    produced: dict[str, tuple[int, ...]] = {}
    consumed: set[str] = set()
    inputs: dict[str, tuple[int, ...]] = {}
    types: Counter[str] = Counter()
    files: set[str] = set()
    total = 0
    for op in ops:
        for decl in op.inputs:
            if decl is None:
                continue
            if decl.is_weight:
                if decl.name not in files:
                    files.add(decl.name)
                    types[decl.dtype or "float32"] += weight_bytes(decl)
                    total += weight_bytes(decl)
                continue
            name = unescape(decl.name)
            consumed.add(name)
            if name not in produced:
                inputs.setdefault(name, decl.dims)
        for decl in op.outputs:
            produced.setdefault(unescape(decl.name), decl.dims)
    outputs = tuple((name, dims) for name, dims in produced.items() if name not in consumed)
    strided = sum(1 for op in ops if op.op_type == "Conv" and ("strides", "2,2") in op.attrs)
    return ModelSummary(tuple(inputs.items()), outputs, frozenset(produced) | frozenset(inputs), dict(types),
                        total, dict(Counter(op.op_type for op in ops)), strided)


def weight_files(ops: list[OpLine], conv: str = "nhwc") -> list[str]:
    """The ``.bin`` files a folder needs, in first-use order; conv weights as their ``_nhwc`` file
    (what OnnxStream's downloader fetches) unless ``conv="nchw"``."""
    names: dict[str, None] = {}
    for op in ops:
        for decl in op.inputs:
            if decl is not None and decl.is_weight:
                name = decl.name
                if conv == "nhwc":
                    name = name.replace("_nchw.bin", "_nhwc.bin")
                names.setdefault(name, None)
    return list(names)


def read_ops(location: str, http: HttpSettings | None = None) -> list[OpLine]:
    """Parsed model.txt of a folder, model.txt path or URL (read with ``http``; None: the defaults)."""
    model_txt = model_txt_location(location)
    pool = SourcePool(http)
    try:
        return parse_model_text(read_text(model_txt, pool), model_txt)
    finally:
        pool.close()


def read_summary(location: str, http: HttpSettings | None = None) -> ModelSummary:
    return summarize(read_ops(location, http))
