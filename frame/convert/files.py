"""Convert one .onnx file or a whole diffusers ONNX folder, atomically.

Streaming: each model's structure (no weight bytes, see ``frame.engine.io.protobuf_index``) is read
once; then its initializers are read, converted and appended to the new data file one at a time
(large ones in row blocks), so memory stays near the largest tensor, whatever the model's size.

Atomic output: nothing is written at DST's name until everything is complete and fsynced.

* A file: ``DST_data`` and ``DST`` are written as hidden temporaries beside DST, fsynced, renamed
  (data first, so DST never points at missing data), and the folder is fsynced.
* A folder: everything is built in a hidden ``.DST.tmp-<pid>`` folder beside DST, which is renamed to
  DST in one step at the end.

An interruption (Ctrl-C, error) removes the temporaries; DST must not exist beforehand, so nothing
already stored is ever replaced or lost.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from frame.atomicfile import fsync_dir
from frame.convert.lora_merge import merging_reader
from frame.convert.policy import Policy, plan
from frame.convert.progress import ByteProgress
from frame.convert.quantize import Scheme
from frame.convert.rewrite import Report, write_rewritten
from frame.engine.errors import ModelFormatError
from frame.engine.io.protobuf_index import scan_model
from frame.engine.io.sources import LocalSource
from frame.engine.io.weights import WeightRef, collect_weights
from frame.engine.lora import LoraFile
from frame.engine.static_shapes import fill_small_values
from frame.errors import UsageError

log = logging.getLogger(__name__)

MODES = ("fp16", "uint8")
MIN_QUANT_OPSET = 13  # DequantizeLinear's ``axis`` (per-channel scales)
DEFAULT_SCHEME = Scheme()  # the measured choice: see benchmarks/quant_schemes.py and docs/benchmarks.md


class NotOnnxError(UsageError):
    """SRC (or a file in it) is not an ONNX model: exit 2 with one line naming it."""


@dataclass
class Options:
    weights: str
    scheme: Scheme = DEFAULT_SCHEME
    policy: Policy = field(default_factory=Policy)
    transform: Callable[[onnx.ModelProto, str], onnx.ModelProto] | None = None  # e.g. dynamic shapes
    loras: tuple[tuple[LoraFile, float], ...] = ()  # merged into the weights (``lora_merge``)


@dataclass
class Source:
    """One model's structure and weight index, read without its weight bytes."""

    path: Path
    proto: onnx.ModelProto
    weights: dict[str, WeightRef]

    @property
    def nbytes(self) -> int:
        return sum(ref.nbytes for ref in self.weights.values())


def read_source(path: Path) -> Source:
    """The model at ``path``; NotOnnxError (exit 2) if it is not an ONNX model."""
    try:
        source = LocalSource(str(path))
    except ModelFormatError as exc:
        raise UsageError(str(exc)) from exc
    try:
        scanned = scan_model(source)
        proto = onnx.ModelProto.FromString(scanned.structure)
        if not proto.HasField("graph") or not (proto.graph.node or proto.graph.output):
            raise ModelFormatError("no graph in it")
        weights = collect_weights(proto.graph, str(path), scanned.embedded)
    except Exception as exc:  # protobuf DecodeError, ModelFormatError, WeightDataError, ...
        detail = str(exc).replace(str(path) + ": ", "").splitlines()[0] if str(exc) else type(exc).__name__
        raise NotOnnxError(f"{path} is not a usable ONNX model ({detail})") from exc
    finally:
        source.close()
    return Source(path, proto, weights)


def _check_target(dst: Path) -> None:
    if dst.exists() or dst.is_symlink():
        raise UsageError(f"{dst} already exists: choose a new name (nothing is overwritten)")
    if not dst.parent.is_dir():
        raise UsageError(f"{dst.parent} does not exist")


def _convert_into(source: Source, onnx_path: Path, data_path: Path, data_name: str, options: Options,
                  progress: ByteProgress | None) -> Report:
    """Write the converted model to ``onnx_path`` / ``data_path`` (plain files, fsynced)."""
    if options.transform is not None:  # before any weight is written: a model it cannot handle fails fast
        structure = onnx.ModelProto()
        structure.CopyFrom(source.proto)
        source = Source(source.path, options.transform(fill_small_values(structure, source.weights),
                                                       str(source.path)), source.weights)
    actions = plan(source.proto.graph, source.weights, options.weights, options.policy)
    opset = next((o.version for o in source.proto.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset < MIN_QUANT_OPSET and any(a.kind == "quantize" for a in actions.values()):
        raise UsageError(f"{source.path}: opset {opset} has no per-channel DequantizeLinear (needs opset "
                         f"{MIN_QUANT_OPSET}+): re-export the model with a newer opset, or use --weights fp16")
    label = options.weights if options.weights == "fp16" else f"uint8 ({options.scheme.label}, per channel)"
    reader = merging_reader(source.path, source.proto, source.weights, options.loras)
    advance = progress.advance if progress is not None else None
    return write_rewritten(onnx_path, data_path, data_name, source.proto, source.weights, actions, reader,
                           options.scheme, advance, label)


def convert_file(src: Path | Source, dst: Path, options: Options, progress: ByteProgress | None = None) -> Report:
    """SRC.onnx → DST (+ DST_data beside it); see the module docstring for atomicity."""
    _check_target(dst)
    source = src if isinstance(src, Source) else read_source(src)
    data_final = dst.with_name(dst.name + "_data")
    tmp_onnx = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    tmp_data = dst.with_name(f".{data_final.name}.tmp-{os.getpid()}")
    renamed_data = False
    if progress is not None:
        progress.label = source.path.name
    try:
        report = _convert_into(source, tmp_onnx, tmp_data, data_final.name, options, progress)
        if tmp_data.exists():
            os.replace(tmp_data, data_final)
            renamed_data = True
        os.replace(tmp_onnx, dst)
    except BaseException:
        for leftover in (tmp_onnx, tmp_data) + ((data_final,) if renamed_data else ()):
            leftover.unlink(missing_ok=True)
        raise
    fsync_dir(dst.parent)
    return report


def _external_files(source: Source) -> set[Path]:
    return {Path(ref.location).resolve() for ref in source.weights.values()
            if ref.location is not None and Path(ref.location).resolve() != source.path.resolve()}


def _copy_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    with open(dst, "rb+") as file:
        os.fsync(file.fileno())


def convert_folder(src: Path, dst: Path, options: Options, progress_stream=None) -> dict[str, Report]:
    """Every .onnx under SRC converted, every other file copied (external data files are rewritten,
    not copied), built in a temporary folder renamed to DST at the end. Returns reports by relative path."""
    _check_target(dst)
    models = sorted(p for p in src.rglob("*.onnx") if p.is_file())
    if not models:
        raise UsageError(f"{src} holds no .onnx file (expected a diffusers ONNX export folder)")
    sources = [read_source(p) for p in models]
    skip = set().union(*(_external_files(s) for s in sources)) | {p.resolve() for p in models}
    progress = ByteProgress(sum(s.nbytes for s in sources), progress_stream)
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    reports: dict[str, Report] = {}
    try:
        tmp.mkdir()
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            if path.resolve() not in skip and not path.name.startswith(".") and "__pycache__" not in path.parts:
                _copy_file(path, tmp / path.relative_to(src))
        for source in sources:
            relative = source.path.relative_to(src)
            target = tmp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            progress.label = str(relative)
            data_name = target.name + "_data"
            reports[str(relative)] = _convert_into(source, target, target.with_name(data_name), data_name,
                                                   options, progress)
        for folder in sorted({p.parent for p in tmp.rglob("*")} | {tmp}, key=lambda p: -len(p.parts)):
            fsync_dir(folder)
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        progress.close()
    fsync_dir(dst.parent)
    return reports


def convert(src: str | os.PathLike, dst: str | os.PathLike, options: Options, progress_stream=None
            ) -> dict[str, Report]:
    """``frame model convert``: a folder or a single file, by what SRC is."""
    src_path, dst_path = Path(src).expanduser(), Path(dst).expanduser()
    if options.weights not in MODES:
        raise UsageError(f"--weights must be one of {', '.join(MODES)}, got {options.weights!r}")
    if not src_path.exists():
        raise UsageError(f"{src_path} does not exist")
    if src_path.resolve() == dst_path.resolve():
        raise UsageError("SRC and DST must differ")
    if src_path.is_dir():
        return convert_folder(src_path, dst_path, options, progress_stream)
    source = read_source(src_path)
    progress = ByteProgress(source.nbytes, progress_stream)
    try:
        return {src_path.name: convert_file(source, dst_path, options, progress)}
    finally:
        progress.close()


def convert_proto(model: onnx.ModelProto, options: Options) -> onnx.ModelProto:
    """An in-memory model converted (through a temporary folder): for fixture builders in tools/."""

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.onnx", Path(tmp) / "out.onnx"
        onnx.save(model, str(src))
        convert_file(src, dst, options)
        return onnx.load(str(dst))


__all__ = ["Options", "NotOnnxError", "convert", "convert_file", "convert_folder", "convert_proto", "read_source"]
