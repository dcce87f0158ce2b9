"""Join the one-file-per-tensor external data torch's exporter writes into one ``model.onnx_data``.

torch writes every weight of a > 2 GB model to its own file next to model.onnx; diffusers/optimum
folders hold one ``model.onnx_data``. ``onnx.load`` + ``onnx.save`` would hold every weight in memory
at once (10 GB for the SDXL UNet), so this copies file by file in 16 MB chunks and rewrites only the
graph's external-data references. Crash-safe: the new data file and graph are written under temporary
names and renamed at the end; the per-tensor files are deleted only after that.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

CHUNK = 16 << 20
ALIGN = 4096  # each tensor starts on a page: lets a reader map it without copying


def _external(tensor: onnx.TensorProto) -> dict[str, str] | None:
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return None
    return {entry.key: entry.value for entry in tensor.external_data}


def _tensors(model: onnx.ModelProto):
    """Every initializer, including those of subgraphs (torch puts none there, but be complete)."""
    yield from model.graph.initializer
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t


def _copy(source: Path, offset: int, length: int | None, sink) -> int:
    copied = 0
    with open(source, "rb") as handle:
        handle.seek(offset)
        while length is None or copied < length:
            block = handle.read(CHUNK if length is None else min(CHUNK, length - copied))
            if not block:
                break
            sink.write(block)
            copied += len(block)
    return copied


def join_external_data(path: Path, location: str = "model.onnx_data") -> int:
    """Rewrite ``path``'s external tensors into ``location`` beside it; returns the bytes written."""
    folder = path.parent
    model = onnx.load(str(path), load_external_data=False)
    target = folder / location
    partial = folder / (location + ".partial")
    sources: set[Path] = set()
    written = 0
    with open(partial, "wb") as sink:
        for tensor in _tensors(model):
            info = _external(tensor)
            if info is None:
                continue
            source = folder / info["location"]
            sources.add(source)
            pad = -written % ALIGN
            sink.write(b"\0" * pad)
            written += pad
            length = _copy(source, int(info.get("offset", 0)), int(info["length"]) if "length" in info else None,
                           sink)
            del tensor.external_data[:]
            for key, value in (("location", location), ("offset", str(written)), ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            written += length
        sink.flush()
        os.fsync(sink.fileno())
    new_graph = folder / (path.name + ".partial")
    onnx.save_model(model, str(new_graph))
    os.replace(partial, target)
    os.replace(new_graph, path)
    for source in sources:
        if source != target and source.exists():
            source.unlink()
    return written


def folder_bytes(folder: Path) -> int:
    """Bytes of the .onnx / .onnx_data files below ``folder`` (symlinks followed)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.suffix in (".onnx", ".onnx_data"))
