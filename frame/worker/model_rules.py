"""``frame config check`` applies the rules the night applies to the configured model.

The night resolves ``model.size`` (``auto`` from the panel's aspect and rotation), ``model.steps`` and
``model.guidance`` (null = the model's defaults) exactly as ``frame.worker.render.generate`` does and
then checks them with ``frame.diffusion.rules``; so does this module, against the model folder
``model.source`` names. Only small JSON files and the UNet's graph (no weights) are read. A model
behind an http(s) URL is checked when it loads (``frame config check`` stays offline).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from frame.config.schema import Config
from frame.diffusion import rules, sizes
from frame.diffusion.configured import PipelineSetup, pipeline_setup
from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import SDXL, ModelInfo, read_model_info
from frame.diffusion.rules import Finding
from frame.diffusion.sizes import night_size
from frame.engine.io.graph_inputs import read_graph_inputs
from frame.errors import FrameError


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep the loaders' INFO lines ("loaded unet/model.onnx: ...") out of the check's output."""
    loggers = [logging.getLogger(name) for name in ("frame.diffusion", "frame.engine")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@functools.lru_cache(maxsize=8)
def _findings(setup: PipelineSetup, model_key: tuple, display_key: tuple) -> tuple[Finding, ...]:
    sampler, steps, guidance, size = model_key
    found = rules.tile_findings(setup.vae_tile, setup.vae_tile_overlap)
    opened = _opened(setup, _stamp(setup.source))
    if opened is None:
        return tuple(found)  # the folder itself is reported by deep_problems' model.source check
    info, static = opened
    night = SimpleNamespace(model=SimpleNamespace(size=size),
                            display=SimpleNamespace(size=display_key[0], rotate=display_key[1]))
    try:
        width, height = night_size(night, _Facts(info, static))
    except FrameError:
        return tuple(found)
    found += rules.generation_findings(
        info, static, sampler=sampler, steps=info.default_steps if steps is None else steps,
        guidance=info.default_guidance if guidance is None else guidance, width=width, height=height)
    return tuple(found)


@dataclass(frozen=True)
class _Facts:
    """What ``night_size`` asks of a pipeline, from the model's facts alone (no graph loaded)."""

    info: ModelInfo
    static: tuple[int, int] | None

    def auto_size(self, aspect: float) -> tuple[int, int]:
        return sizes.auto_size(self.info, aspect, self.static)


def _stamp(source: str) -> float:
    """When the model folder last changed (its model_index.json, else the folder): a new model in the
    same folder is opened again instead of answered from the cache."""
    folder = Path(source).expanduser()
    for path in (folder / "model_index.json", folder):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return 0.0


@functools.lru_cache(maxsize=4)
def _opened(setup: PipelineSetup, stamp: float) -> tuple[ModelInfo, tuple[int, int] | None] | None:
    """The model's facts and fixed latent size (None for free axes); None when it cannot be opened
    (``deep_problems`` reports the folder). Small files and the UNet's graph inputs only, no weights.

    A local diffusers export is read without numpy, onnx or Pillow (``frame.engine.io.graph_inputs``:
    the UNet's ``sample`` input, nothing else of its graph), so the settings checks' child stays at
    its interpreter's size (61 -> 22 MiB on x86, it may run beside the render worker);
    an OnnxStream folder is opened as the pipeline opens it (``PipelineSetup.open_structure``)."""
    folder = Path(setup.source).expanduser()
    with _quiet():
        try:
            if (folder / "model_index.json").is_file() and not any(folder.glob("*/model.txt")):
                return _export_facts(setup.source, setup.cache_dir)
            pipe = setup.open_structure()
            return pipe.info, pipe.unet_static_latent()
        except (FrameError, OSError):
            return None


def _export_facts(source: str, cache_dir: str) -> tuple[ModelInfo, tuple[int, int] | None]:
    """``open_model_files`` + ``Pipeline.unet_static_latent`` for a local diffusers export, light."""
    files = ModelFiles(source, cache_dir or None)
    info = read_model_info(files)
    names = [("text_encoder", "tokenizer")] + ([("text_encoder_2", "tokenizer_2")] if info.kind == SDXL else [])
    for model, tokenizer in names:  # the files the Pipeline checks when it is built: FrameError as there
        files.local_folder(tokenizer)
        files.onnx(model)
    files.onnx("vae_decoder")
    shape = read_graph_inputs(files.onnx("unet")).get("sample")  # as denoise.static_latent_size reads it
    if shape and len(shape) == 4 and isinstance(shape[2], int) and isinstance(shape[3], int):
        return info, (shape[2], shape[3])
    return info, None


def prompt_findings(config: Config, *, sampler: str | None, steps: int | None, guidance: float | None,
                    width: int | None, height: int | None) -> list[Finding] | None:
    """The rules the configured model imposes on a queued prompt's own settings (None: the night's),
    as the night will apply them: its size step (16 px for the demo, 64 for SD 1.5/SDXL exports), its
    step limit, the samplers its schedule allows. Only findings about a value the prompt sets itself
    are returned, each keyed by that field. None when the model cannot be asked here (a model behind a
    URL is checked when it loads; a folder it cannot open is reported by ``deep_problems``)."""
    setup = pipeline_setup(config)
    if "://" in setup.source:
        return None
    opened = _opened(setup, _stamp(setup.source))
    if opened is None:
        return None
    info, static = opened
    model = config.model
    own = {"sampler": sampler, "steps": steps, "guidance": guidance, "size": width}
    found = rules.generation_findings(
        info, static, sampler=sampler or model.sampler,
        steps=steps if steps is not None else model.steps if model.steps is not None else info.default_steps,
        guidance=guidance if guidance is not None else model.guidance if model.guidance is not None
        else info.default_guidance, width=width, height=height)
    kept = []
    for finding in found:
        key = finding.key if own.get(finding.key) is not None else "sampler" if finding.key == "steps" else None
        if not finding.warning and key is not None and own.get(key) is not None:
            kept.append(Finding(key, finding.message))
    return kept


def size_rule(config: Config) -> str | None:
    """The configured model's size rule in words for a form's label ("multiples of 16 px for this SD 1.5
    model", "only 512x512 for this fixed-size export"), or None when it cannot be asked here."""
    setup = pipeline_setup(config)
    opened = None if "://" in setup.source else _opened(setup, _stamp(setup.source))
    if opened is None:
        return None
    info, static = opened
    if static is not None:
        return f"only {static[1] * info.vae_factor}x{static[0] * info.vae_factor} for this fixed-size export"
    return f"multiples of {sizes.pixel_step(info)} px for this {info.label} model"


def night_pixels(config: Config) -> tuple[int, int] | None:
    """The size tonight's picture is painted at (``sizes.night_size``: ``model.size``, or for "auto" the
    model's area at the panel's aspect), for the queue form's hint; None when it cannot be asked here."""
    size = sizes.parse_size(config.model.size)
    if size:
        return size
    setup = pipeline_setup(config)
    opened = None if "://" in setup.source else _opened(setup, _stamp(setup.source))
    if opened is None:
        return None
    try:
        return night_size(config, _Facts(*opened))
    except FrameError:
        return None


def model_findings(config: Config) -> list[Finding]:
    """Every rule the configured ``model`` section breaks on the configured model (warnings included)."""
    setup = pipeline_setup(config)
    model = config.model
    if "://" in setup.source:
        return rules.tile_findings(setup.vae_tile, setup.vae_tile_overlap)
    model_key = (model.sampler, model.steps, model.guidance, model.size)
    return list(_findings(setup, model_key, (config.display.size, config.display.rotate)))
