"""The pipeline as the configuration describes it: one place that turns ``config.model`` (source,
weights provider, attention, VAE tiles, HTTP token/timeouts/weight cache) and ``worker.memory_limit_mb``
(which decides how the guidance passes run) into ``load_pipeline`` arguments, and ``model.loras``
with the LoRA folders into the pipeline's, for ``frame render`` and
the render worker alike."""

from __future__ import annotations

import os
from typing import Any

from frame.config import lora_tags
from frame.engine.io.http_settings import from_model_config
from frame.models import resolve_model_source


def load_configured_pipeline(config: Any, source: str | None = None) -> Any:
    """``load_pipeline`` for ``source`` (default: ``model.source`` resolved, "demo" = the bundled model)."""
    from frame.diffusion.pipeline import load_pipeline

    model = config.model
    source = source or resolve_model_source(model.source)
    http = from_model_config(model, source, config.state_dir)
    pipe = load_pipeline(source, cache_dir=model.cache_dir or None, weights=model.weights,
                         attention_slices=model.attention_slices, vae_tile=model.vae_tile,
                         vae_tile_overlap=model.vae_tile_overlap, memory_limit_mb=config.worker.memory_limit_mb,
                         http=http)
    pipe.loras = lora_tags.configured_requests(config)
    pipe.lora_folders = lora_tags.lora_folders(source, os.path.expanduser(config.state_dir))
    return pipe
