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
from types import SimpleNamespace

from frame.config.schema import Config
from frame.diffusion import rules
from frame.diffusion.rules import Finding
from frame.diffusion.sizes import night_size
from frame.errors import FrameError
from frame.models import resolve_model_source


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
def _findings(source: str, cache_dir: str, model_key: tuple, display_key: tuple) -> tuple[Finding, ...]:
    from frame.diffusion.pipeline import Pipeline, engine_loader, open_model_files

    sampler, steps, guidance, size, vae_tile, vae_tile_overlap = model_key
    found = rules.tile_findings(vae_tile, vae_tile_overlap)
    with _quiet():
        try:
            files, info = open_model_files(source, cache_dir or None)
            pipe = Pipeline(files, info, engine_loader("nocache"))
            static = pipe.unet_static_latent()
            night = SimpleNamespace(model=SimpleNamespace(size=size),
                                    display=SimpleNamespace(size=display_key[0], rotate=display_key[1]))
            width, height = night_size(night, pipe)
        except FrameError:
            return tuple(found)  # the folder itself is reported by deep_problems' model.source check
    found += rules.generation_findings(
        info, static, sampler=sampler, steps=info.default_steps if steps is None else steps,
        guidance=info.default_guidance if guidance is None else guidance, width=width, height=height)
    return tuple(found)


def model_findings(config: Config) -> list[Finding]:
    """Every rule the configured ``model`` section breaks on the configured model (warnings included)."""
    source = resolve_model_source(config.model.source)
    model = config.model
    if "://" in source:
        return rules.tile_findings(model.vae_tile, model.vae_tile_overlap)
    model_key = (model.sampler, model.steps, model.guidance, model.size, model.vae_tile, model.vae_tile_overlap)
    return list(_findings(source, model.cache_dir, model_key, (config.display.size, config.display.rotate)))
