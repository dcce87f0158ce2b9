"""Checks that need more than the schema: names known to other parts, files that must exist.

Kept out of ``load_config`` so the daemon's start-up stays cheap; ``frame config check`` runs them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from frame.config.schema import Config
from frame.config.validate import did_you_mean
from frame.models import resolve_model_source


def _suggestion(value: str, known: list[str]) -> str:
    return did_you_mean(value, known) or f" (known: {', '.join(known)})"


def _names(module: str, function: str) -> list[str] | None:
    try:
        return list(getattr(importlib.import_module(module), function)())
    except (ImportError, AttributeError):
        return None  # that part has not landed: nothing to check against


def deep_problems(config: Config) -> list[str]:
    problems = []
    source = resolve_model_source(config.model.source)
    if "://" not in source and not (Path(source).expanduser() / "model_index.json").is_file():
        problems.append(f"model.source: {source} is not a diffusers ONNX export folder "
                        "(no model_index.json there)")
    panels = _names("frame.display", "panel_names")
    if panels is not None and config.display.panel not in panels:
        problems.append(f"display.panel: unknown panel {config.display.panel!r}"
                        + _suggestion(config.display.panel, panels))
    palettes = _names("frame.display", "palette_names")
    if palettes is not None and config.display.palette not in palettes:
        problems.append(f"display.palette: unknown palette {config.display.palette!r}"
                        + _suggestion(config.display.palette, palettes))
    return problems
