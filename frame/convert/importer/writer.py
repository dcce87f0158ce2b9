"""``frame model import``: a checkpoint in, a diffusers ONNX folder out, written aside and resumable.

Everything is built in ``.DST.import`` beside DST and renamed to DST in one step when complete, so DST
never holds half a model (and must not exist beforehand: nothing stored is replaced). Each graph is
written into a ``.<graph>.partial`` folder and its files renamed into ``<graph>/`` when fsynced, the
data file first and ``model.onnx`` last, so a graph whose ``model.onnx`` exists is complete. An
import stopped by a power cut, Ctrl-C or a network failure leaves the aside folder; the same command
run again keeps the graphs already complete and writes the rest, provided the source and the options
are the same (``.import.json`` records both; anything else starts afresh). Bad input (a file frame
refuses) is found before the aside folder is made, or, when only a tensor's bytes show it, the aside
folder is removed with the refusal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import onnx

from frame.atomicfile import fsync_dir
from frame.convert.checkpoint.plan import Detected, Options, detect
from frame.convert.checkpoint.reader import Checkpoint, Opener, open_checkpoint
from frame.convert.importer.graph_weights import write_graph
from frame.convert.importer.layout import GRAPHS, write_json, write_small_files
from frame.convert.progress import ByteProgress
from frame.convert.rewrite import Report
from frame.engine.io.sources import is_url
from frame.errors import UsageError

log = logging.getLogger(__name__)

WEIGHTS = ("fp32", "fp16", "uint8")
STATE = ".import.json"
Builder = Callable[[dict], onnx.ModelProto]


@dataclass(frozen=True)
class ImportOptions:
    weights: str = "fp16"
    prediction: str | None = None
    use_ema: bool = False
    vae: str | None = None  # --vae FILE
    config_dir: str | None = None  # --config-from DIR


@dataclass
class ImportResult:
    detected: Detected
    reports: dict[str, Report] = field(default_factory=dict)
    resumed: list[str] = field(default_factory=list)  # graphs kept from an earlier, stopped run


def _identity(checkpoint: Checkpoint) -> dict:
    """What says the source is the same file as last time: its location (hashed: a URL may carry a
    token), size and ETag or modification time, per file."""
    parts = getattr(checkpoint, "parts", None) or {"": checkpoint}
    out = {}
    for name, part in sorted(parts.items()):
        source = getattr(part, "source", None)  # a local .ckpt has none: its file is read by path
        location = source.location if source is not None else part.location
        stamp = getattr(source, "validator", None)
        size = source.size() if source is not None else os.path.getsize(location)
        if stamp is None and os.path.exists(location):
            stamp = os.stat(location).st_mtime_ns
        out[name] = [hashlib.sha256(getattr(source, "url", location).encode()).hexdigest()[:16], size, str(stamp)]
    return out


def _check_target(dst: Path) -> None:
    if dst.exists() or dst.is_symlink():
        raise UsageError(f"{dst} already exists: choose a new name (nothing is overwritten)")
    if not dst.parent.is_dir():
        raise UsageError(f"{dst.parent} does not exist")


def _prepare_aside(aside: Path, state: dict) -> None:
    """Keep ``aside`` from a stopped run of the same import, else start it afresh."""
    recorded = aside / STATE
    if aside.exists():
        try:
            same = json.loads(recorded.read_text(encoding="utf-8")) == state
        except (OSError, ValueError):
            same = False
        if not same:
            log.info("%s is from another import: starting afresh", aside)
            shutil.rmtree(aside)
    aside.mkdir(exist_ok=True)
    write_json(recorded, state)
    fsync_dir(aside.parent)


def _write_one(aside: Path, graph: str, model: onnx.ModelProto, component, weights: str,
               progress: ByteProgress) -> Report:
    partial = aside / f".{graph}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    progress.label = graph
    report = write_graph(model, component, partial, weights, progress.advance)
    target = aside / graph
    target.mkdir(exist_ok=True)
    for name in ("model.onnx_data", "model.onnx"):  # the data first: model.onnx marks the graph complete
        if (partial / name).exists():
            os.replace(partial / name, target / name)
    fsync_dir(target)
    partial.rmdir()
    return report


def import_model(src: str, dst: str | os.PathLike, options: ImportOptions, builders: Mapping[str, Builder],
                 opener: Opener | None = None, progress_stream=None,
                 on_detected: Callable[[Detected], None] | None = None) -> ImportResult:
    """Import ``src`` (file, folder or URL) into the new folder ``dst`` with ``builders`` making each
    graph (``unet``, ``vae_decoder``, ``vae_encoder``, ``text_encoder``, ``text_encoder_2``) from its
    component's config."""
    if options.weights not in WEIGHTS:
        raise UsageError(f"--weights must be one of {', '.join(WEIGHTS)}, got {options.weights!r}")
    dst_path = Path(dst).expanduser()
    _check_target(dst_path)
    opener = opener or Opener()
    checkpoint = open_checkpoint(src, opener)
    vae = open_checkpoint(options.vae, opener) if options.vae else None
    try:
        name = source_name(src)
        found = detect(checkpoint, Options(options.prediction, options.use_ema, name, options.config_dir, vae))
        if found.family == "vae":
            raise UsageError(f"{src}: a VAE file, not a model: give it with --vae, or use "
                             "'frame model import VAE --into MODEL' to replace a model's VAE")
        if on_detected is not None:
            on_detected(found)
        state = {"source": _identity(checkpoint), "vae": _identity(vae) if vae else None,
                 "options": [options.weights, found.prediction, options.use_ema, options.config_dir]}
        result = ImportResult(found)
        aside = dst_path.with_name(f".{dst_path.name}.import")
        _prepare_aside(aside, state)
        write_small_files(found, aside, name, options.config_dir, checkpoint.configs.get("scheduler"))
        graphs = [(graph, component) for component in found.components for graph in GRAPHS[component.name]]
        progress = ByteProgress(sum(_graph_bytes(g, c) for g, c in graphs), progress_stream)
        try:
            for graph, component in graphs:
                if (aside / graph / "model.onnx").is_file():
                    result.resumed.append(graph)
                    progress.advance(_graph_bytes(graph, component))
                    continue
                model = builders[graph](component.config)
                result.reports[graph] = _write_one(aside, graph, model, component, options.weights, progress)
        except UsageError:
            shutil.rmtree(aside, ignore_errors=True)  # a file frame refuses: running again would not help
            raise
        finally:
            progress.close()
        (aside / STATE).unlink()
        for folder in sorted({p.parent for p in aside.rglob("*")} | {aside}, key=lambda p: -len(p.parts)):
            fsync_dir(folder)
        os.rename(aside, dst_path)
        fsync_dir(dst_path.parent)
        return result
    finally:
        checkpoint.close()
        if vae is not None:
            vae.close()


VAE_PARTS = {"vae_decoder": ("decoder.", "post_quant_conv."), "vae_encoder": ("encoder.", "quant_conv.")}


def _graph_bytes(graph: str, component) -> int:
    """float32 bytes of the weights ``graph`` uses (the VAE's two graphs share its component)."""
    prefixes = VAE_PARTS.get(graph, ("",))
    return sum(4 * math.prod(s) for k, s in component.shapes().items() if k.startswith(prefixes))


def source_name(src: str) -> str:
    """The file or folder name of SRC (a URL's path only: never its query or credentials)."""
    return os.path.basename(urlsplit(src).path.rstrip("/")) if is_url(src) else os.path.basename(src.rstrip("/"))
