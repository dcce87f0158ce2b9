"""``frame model import VAE.safetensors --into MODEL``: a standalone VAE (``vae-ft-mse-840000``,
``sdxl-vae-fp16-fix``, original or diffusers names) replaces the VAE of a model folder frame runs.

The new ``vae_decoder``/``vae_encoder`` graphs are written complete into hidden folders inside MODEL
first (``.vae_decoder.import``...), then each old folder is renamed aside, the new one into its place,
and the old one deleted, so a render never finds a half-written VAE. The model's own VAE config gives
what a VAE file cannot say (its scaling factor, its native size); the file's shapes must agree with
the widths that config names, or nothing changes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import onnx

from frame.atomicfile import fsync_dir
from frame.convert.checkpoint import configs
from frame.convert.checkpoint.components import Component
from frame.convert.checkpoint.plan import detect_vae
from frame.convert.checkpoint.reader import Opener, open_checkpoint
from frame.convert.importer.graph_weights import write_graph
from frame.convert.importer.layout import write_json
from frame.convert.rewrite import Report
from frame.errors import UsageError

GRAPHS = ("vae_decoder", "vae_encoder")


def _model_vae_config(model: Path) -> dict:
    path = model / "vae_decoder" / "config.json"
    if not (model / "model_index.json").is_file() or not path.is_file():
        raise UsageError(f"{model}: not a model folder with a vae_decoder/ (give the folder 'frame model import' "
                         "or optimum wrote)")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot be read as JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{path}: not a JSON object")
    return value


def replace_vae(src: str, model: str | os.PathLike, weights: str,
                builders: Mapping[str, Callable[[dict], onnx.ModelProto]], opener: Opener | None = None
                ) -> dict[str, Report]:
    """Write ``src``'s VAE into ``model`` in ``weights`` precision; returns a report per graph."""
    folder = Path(model).expanduser()
    given = _model_vae_config(folder)
    checkpoint = open_checkpoint(src, opener)
    try:
        vae = detect_vae(checkpoint)
        config = configs.overridden("vae", vae.config, given, str(folder / "vae_decoder" / "config.json"))
        component = Component("vae", config, vae.takes, checkpoint)
        graphs = [g for g in GRAPHS if (folder / g).is_dir()]
        reports: dict[str, Report] = {}
        staged = []
        try:
            for graph in graphs:
                new = folder / f".{graph}.import"
                shutil.rmtree(new, ignore_errors=True)
                new.mkdir()
                staged.append(new)
                reports[graph] = write_graph(builders[graph](config), component, new, weights)
                write_json(new / "config.json", config)
                fsync_dir(new)
        except BaseException:
            for new in staged:
                shutil.rmtree(new, ignore_errors=True)
            raise
        for graph in graphs:
            old = folder / f".{graph}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(folder / graph, old)
            os.rename(folder / f".{graph}.import", folder / graph)
            fsync_dir(folder)
            shutil.rmtree(old)
        return reports
    finally:
        checkpoint.close()
