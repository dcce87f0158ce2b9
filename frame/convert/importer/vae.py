"""The VAEs ``frame model import`` writes: a standalone VAE into a model folder, a tiny VAE into its own.

``frame model import VAE.safetensors --into MODEL``: a standalone VAE (``vae-ft-mse-840000``,
``sdxl-vae-fp16-fix``, original or diffusers names) replaces the VAE of a model folder frame runs.

The new ``vae_decoder``/``vae_encoder`` graphs are written complete into hidden folders inside MODEL
first (``.vae_decoder.import``...), then each old folder is renamed aside, the new one into its place,
and the old one deleted, so a render never finds a half-written VAE. The model's own VAE config gives
what a VAE file cannot say (its scaling factor, its native size); the file's shapes must agree with
the widths that config names, or nothing changes.

``frame model import --tiny-vae SRC DST``: TAESD / TAESDXL into a tiny-VAE folder frame decodes with.

SRC is madebyollin's published ``taesd_decoder.safetensors`` / ``taesdxl_decoder.safetensors`` (a path
or URL; the ``_encoder`` file beside it is read too when it is there, for image-to-image), a diffusers
``AutoencoderTiny`` folder (``config.json`` + ``diffusion_pytorch_model.safetensors``), or the names
``taesd`` / ``taesdxl`` for madebyollin's files on GitHub. DST gets ``vae_decoder/`` (and
``vae_encoder/``), each ``model.onnx`` + data + the AutoencoderTiny ``config.json`` (its scaling factor
is what the pipeline divides the latents by, as diffusers does). Tensors are read one at a time and
written with the import's fp16/uint8 rewrite; everything is written in ``.DST.import`` beside DST and
renamed when complete, and DST must not exist (nothing stored is replaced).
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
from frame.convert.checkpoint.components import FLOAT_DTYPES, Component, Take
from frame.convert.checkpoint.plan import detect_vae
from frame.convert.checkpoint.reader import Checkpoint, Opener, open_checkpoint, open_file
from frame.convert.graphs import TinyVaeConfig, build_taesd_decoder, build_taesd_encoder, weight_specs
from frame.convert.graphs.taesd import from_taesd_keys
from frame.convert.importer.graph_weights import write_graph
from frame.convert.importer.layout import write_json
from frame.convert.rewrite import Report
from frame.engine.io.sources import is_url
from frame.errors import UsageError

GRAPHS = ("vae_decoder", "vae_encoder")
PUBLISHED = "https://github.com/madebyollin/taesd/raw/main/"
NAMES = ("taesd", "taesdxl")  # SD 1.x/2.x latents, SDXL latents


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


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if is_url(base) else str(Path(base).expanduser() / name)


def _sources(src: str, opener: Opener) -> tuple[dict, dict[str, str]]:
    """(AutoencoderTiny config, {side: file}) for SRC; the encoder only when it exists."""
    if src in NAMES:
        src = f"{PUBLISHED}{src}_decoder.safetensors"
    if not src.endswith(".safetensors"):  # a diffusers AutoencoderTiny folder
        raw = opener.small(_join(src, "config.json"))
        if raw is None:
            raise UsageError(f"{src}: neither a TAESD .safetensors file nor a folder with an AutoencoderTiny "
                             "config.json")
        try:
            config = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{src}/config.json: not JSON ({exc})") from None
        if not isinstance(config, dict) or config.get("_class_name") != "AutoencoderTiny":
            raise UsageError(f"{src}/config.json: not an AutoencoderTiny config (_class_name "
                             f"{config.get('_class_name') if isinstance(config, dict) else None!r})")
        weights = _join(src, "diffusion_pytorch_model.safetensors")
        return config, {"decoder": weights, "encoder": weights}
    files = {"decoder": src}
    if "_decoder" in src:
        encoder = src.replace("_decoder", "_encoder")
        if _exists(opener, encoder):
            files["encoder"] = encoder
    return {"_class_name": "AutoencoderTiny"}, files


def _exists(opener: Opener, location: str) -> bool:
    try:
        opener.source(location).close()
    except (UsageError, OSError):
        return False
    return True


def _component(side: str, checkpoint: Checkpoint, specs: Mapping[str, tuple[int, ...]]) -> Component:
    """The side's weights, checked: every tensor the graph reads, with its shape, and no other."""
    keys = [k for k in checkpoint.tensors if k.startswith(f"{side}.")] or \
        [k for k in checkpoint.tensors if not k.startswith(("encoder.", "decoder."))]
    names = from_taesd_keys(keys, side)
    takes = {new: Take(old) for old, new in names.items()}
    for old in names:
        if checkpoint.tensors[old].dtype not in FLOAT_DTYPES:
            raise UsageError(f"{checkpoint.location}: {old} is {checkpoint.tensors[old].dtype}, not a float tensor")
    component = Component("vae", {}, takes, checkpoint)
    shapes = component.shapes()
    missing = sorted(set(specs) - set(shapes))
    extra = sorted(set(shapes) - set(specs))
    wrong = sorted(k for k in set(specs) & set(shapes) if specs[k] != shapes[k])
    if missing or extra or wrong:
        detail = (f"missing {missing[0]}" if missing else f"unexpected {extra[0]}" if extra
                  else f"{wrong[0]} is {shapes[wrong[0]]}, TAESD's is {specs[wrong[0]]}")
        raise UsageError(f"{checkpoint.location}: not a TAESD {side} of this config ({detail})")
    return component


def import_tiny_vae(src: str, dst: str | os.PathLike, weights: str = "fp16", opener: Opener | None = None
                    ) -> dict[str, Report]:
    """Write SRC's tiny decoder (and encoder) into the new folder DST; returns a report per graph."""
    opener = opener or Opener()
    target = Path(dst).expanduser()
    if target.exists():
        raise UsageError(f"{target}: exists already (give a new folder: nothing stored is replaced)")
    config, files = _sources(src, opener)
    cfg = TinyVaeConfig.from_diffusers(config)
    config = {**config, "scaling_factor": cfg.scaling_factor}
    builders = {"decoder": build_taesd_decoder, "encoder": build_taesd_encoder}
    aside = target.with_name(f".{target.name}.import")
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir(parents=True)
    reports: dict[str, Report] = {}
    try:
        for side, location in files.items():
            graph = builders[side](cfg)
            checkpoint = open_file(location, opener)
            try:
                component = _component(side, checkpoint, dict(weight_specs(graph)))
                folder = aside / f"vae_{side}"
                folder.mkdir()
                reports[folder.name] = write_graph(graph, component, folder, weights)
                write_json(folder / "config.json", config)
                fsync_dir(folder)
            finally:
                checkpoint.close()
        fsync_dir(aside)
        os.rename(aside, target)
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(aside, ignore_errors=True)
        raise
    return reports
