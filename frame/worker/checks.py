"""Can the worker use this configuration? Checks that need more than the schema: files that must exist,
and the rules the configured model imposes on the ``model`` section (``model_rules``). They live with
the worker, above display and diffusion, so that ``frame.config`` stays at the bottom of the layers.
Panel and palette names are not checked here: the schema checks them against the panel table.

Kept out of ``load_config`` so the daemon's start-up stays cheap; ``frame config check`` runs them
together with the schema checks (``check_config``), so one run reports every problem with its line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frame.config.loader import validate
from frame.config.schema import Config
from frame.config.validate import Path as KeyPath
from frame.config.validate import format_path
from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import SDXL, read_model_info
from frame.diffusion.vae.tiny import open_tiny_vae
from frame.errors import ConfigError, FrameError
from frame.models import resolve_model_source
from frame.redact import redact_text
from frame.worker.model_rules import model_findings, night_pixels, prompt_findings, size_rule


def deep_problems(config: Config) -> list[tuple[KeyPath, str]]:
    """``(key path, message)`` for each value the schema accepts but the rest of frame cannot use."""

    problems: list[tuple[KeyPath, str]] = []
    source = resolve_model_source(config.model.source)
    if "://" not in source and not (Path(source).expanduser() / "model_index.json").is_file():
        problems.extend((("model", "source"), message) for message in _onnxstream_problems(source))
    backend = config.render.backend
    if backend in ("remote", "comfyui") and not config.render.remote.url:
        example = "http://192.168.1.20:8188" if backend == "comfyui" else "http://192.168.1.20:7860"
        problems.append((("render", "remote", "url"), f"is empty, but render.backend is {backend}: set the render "
                         f"server's URL (e.g. {example}) or set render.backend: local"))
    if config.render.remote.workflow:
        from frame.remote.comfyui import load_workflow

        try:
            load_workflow(config.render.remote.workflow)
        except ValueError as exc:
            problems.append((("render", "remote", "workflow"), str(exc)))
    problems.extend((("model", f.key), f.message) for f in model_findings(config) if not f.warning)
    tiny = _tiny_vae_problem(config, source)
    if tiny:
        problems.append((("model", "vae_decoder"), tiny))
    return problems


def _tiny_vae_problem(config: Config, source: str) -> str | None:
    """``model.vae_decoder`` names a folder that is missing, not a tiny VAE, or for the other family (a URL
    is asked when the render loads it, as model.source is)."""
    value = config.model.vae_decoder
    if not value or "://" in value:
        return None
    try:
        sdxl = read_model_info(ModelFiles(source)).kind == SDXL if "://" not in source else value == "taesdxl"
    except (FrameError, OSError):
        sdxl = value == "taesdxl"  # the model's own problem is reported for model.source
    try:
        open_tiny_vae(value, config.state_dir, sdxl)
    except FrameError as exc:
        return str(exc).removeprefix("model.vae_decoder: ")
    return None


def queued_problems(config: Config, settings: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``(field, message)`` for each of a queued prompt's own settings (the store's columns: steps,
    sampler, guidance, width, height; None or absent = the night's) that the configured model refuses:
    the one rule the night, ``frame config check`` and the settings page apply (``model_rules``).
    None when the model cannot be asked without loading it (a model behind a URL)."""
    found = prompt_findings(config, sampler=settings.get("sampler"), steps=settings.get("steps"),
                            guidance=settings.get("guidance"), width=settings.get("width"),
                            height=settings.get("height"))
    if found is None:
        return None
    return [(finding.key, redact_text(finding.message)) for finding in found]


def model_size_rule(config: Config) -> str | None:
    """The sizes the configured model paints, in words for a form ("multiples of 16 px for this SD 1.5
    model"); None when the model is behind a URL (asked when it loads)."""
    return size_rule(config)


def model_night_size(config: Config) -> str | None:
    """Tonight's picture size as "WIDTHxHEIGHT" (``model_rules.night_pixels``), or None."""
    size = night_pixels(config)
    return f"{size[0]}x{size[1]}" if size else None


def _onnxstream_problems(source: str) -> list[str]:
    """No model_index.json: fine if it is an OnnxStream folder frame can run, else say what is missing."""
    from frame.diffusion.onnxstream_layout import OnnxStreamFiles, is_onnxstream_folder

    folder = Path(source).expanduser()
    if not folder.exists():
        return [f"{source} does not exist (model.source names a model folder, an http(s) URL, or 'demo')"]
    if not folder.is_dir():
        return [f"{source} is a file, not a model folder (a diffusers ONNX export or an OnnxStream folder)"]
    if not is_onnxstream_folder(source):
        return [f"{source} is neither a diffusers ONNX export folder (no model_index.json there) nor an "
                "OnnxStream model folder (tokenizer/vocab.txt or sdxl_tokenizer/vocab.txt plus model.txt folders)"]
    try:
        OnnxStreamFiles(source).model_info()
    except FrameError as exc:
        return [str(exc)]
    return []


def check_config(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """``load_config`` plus the checks that need other parts (panel names, the model folder), all
    reported together, each with its line; what ``frame config check`` runs."""
    config, problems, source = validate(path, environ)
    reported = {line.split(":", 1)[0] for line in problems.lines}
    for key_path, message in deep_problems(config):
        if format_path(key_path) not in reported:  # a value the schema rejected was replaced by its default
            problems.add(key_path, redact_text(message))  # they may quote a URL with its credentials
    if problems.lines:
        raise ConfigError(problems.lines, source)
    return config
