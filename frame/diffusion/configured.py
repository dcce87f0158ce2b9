"""The pipeline as the configuration describes it: the one place that turns ``config.model`` (source,
weights provider, attention, VAE tiles, HTTP token/timeouts/weight cache, noise source) and
``worker.memory_limit_mb`` (which decides how the guidance passes run) into plain typed values, and
``model.loras`` with the LoRA folders, the VAE tiles and the memory limit into the pipeline's
``RenderPlan`` (``PipelineSetup.plan``), handed to it at construction.

Every caller that starts from a configuration comes through here: the render worker and ``frame
render`` (``load_configured_pipeline``), the night's estimate (the same pipeline, and its resolved
``PipelineSetup.weights``), ``frame serve-render`` (``pipeline_setup`` with its own loader and VAE
tile) and the configuration checks (``open_structure``). Below this module nothing reads the
configuration: the pipeline and the engine take a ``PipelineSetup``'s fields (``HttpSettings``, a
provider name, numbers, a ``RenderPlan``), so a new ``model.*`` setting is read here once and reaches
every caller. A caller that counts the VAE decoder's peak (``frame.estimate``, a layer above) hands
the counter in through ``load(vae_peak=...)``; it is put in the plan before the pipeline is returned.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from frame.config import embedding_names, lora_tags
from frame.config.lora_tags import LoraRequest
from frame.diffusion.model_info import SDXL
from frame.diffusion.render_plan import RenderPlan
from frame.diffusion.vae.tiny import open_tiny_vae
from frame.engine.io.http_settings import HttpSettings, origin
from frame.models import resolve_model_source

if TYPE_CHECKING:
    from frame.config.schema import Config, ModelConfig
    from frame.diffusion.pipeline import Loader, Pipeline
    from frame.diffusion.vae.tiles import PeakMb

VaePeak = Callable[["Pipeline"], "PeakMb"]  # the loaded pipeline -> its VAE decoder's counted peak per tile

AUTO_WEIGHTS = "prefetch"  # model.weights "auto": prefetch from disk; the engine takes its http variant for URLs

PLANS_FOLDER = "model-plans"  # in the state dir: frame.engine.plan_cache's folder (named here: the checks
# set pipelines up without the engine's registry, which imports onnx)


@dataclass(frozen=True)
class PipelineSetup:
    """What ``load_pipeline`` needs, decided from the configuration once. ``weights`` is an engine
    provider name ("auto" already resolved); ``memory_limit_mb`` None: no limit known."""

    source: str
    cache_dir: str | None
    weights: str
    attention_slices: int | None
    vae_tile: int | None  # None: the fewest tiles that fit memory_limit_mb (frame.diffusion.vae.tiles)
    vae_tile_overlap: int
    memory_limit_mb: float | None
    http: HttpSettings
    noise: str = "frame"  # model.noise: the seed's random source (frame.diffusion.noise)
    embeddings_dir: str | None = None  # STATE_DIR/embeddings, searched after the model's own folders
    loras: tuple[LoraRequest, ...] = ()  # model.loras as LoRA requests (lora_tags.configured_requests)
    lora_folders: tuple[str, ...] = ()  # where <lora:NAME:...> tags are looked up (lora_tags.lora_folders)
    plans_dir: str | None = None  # STATE_DIR/model-plans: the components' plans kept between nights
    vae_decoder: str = ""  # model.vae_decoder: "" the model's VAE, else a tiny VAE (frame.diffusion.vae.tiny)
    state_dir: str | None = None  # where taesd / taesdxl are looked up (STATE_DIR/models/)

    def loader(self) -> Loader:
        """Frame's engine loader with these weights, attention slices and HTTP settings."""
        from frame.diffusion.pipeline import engine_loader

        return engine_loader(self.weights, self.attention_slices, self.http, self.plans_dir)

    def plan(self, vae_tile: int | None = None) -> RenderPlan:
        """How the pipeline renders, as configured: the VAE tiles, the memory limit, the LoRAs and their
        folders; ``vae_tile`` replaces the tile size."""
        return RenderPlan(vae_tile=self.vae_tile if vae_tile is None else vae_tile,
                          vae_tile_overlap=self.vae_tile_overlap, memory_limit_mb=self.memory_limit_mb,
                          loras=self.loras, lora_folders=self.lora_folders)

    def load(self, loader: Loader | None = None, vae_tile: int | None = None, *,
             vae_peak: VaePeak | None = None) -> Pipeline:
        """``load_pipeline`` with these values; ``loader`` / ``vae_tile`` replace the engine loader and
        the tile size (``frame serve-render`` on onnxruntime). ``vae_peak``: counts the loaded decoder's
        peak per tile (``frame.estimate.vae.peak_counter``), so the render decodes the fewest
        tiles that fit the memory limit, as the night's estimate counts them."""
        from frame.diffusion.pipeline import load_pipeline

        pipe = load_pipeline(self.source, cache_dir=self.cache_dir, loader=loader or self.loader(),
                             plan=self.plan(vae_tile), http=self.http, noise=self.noise)
        if self.embeddings_dir:  # embeddings/ in the state folder too, after the model's own
            pipe.embeddings.add_folder(Path(self.embeddings_dir))
        self._use_tiny_vae(pipe)
        if vae_peak is not None:  # counted on the decoder the pipeline runs (a tiny VAE's, if chosen)
            pipe.use_plan(dataclasses.replace(pipe.plan, vae_peak_mb=vae_peak(pipe)))
        return pipe

    def _use_tiny_vae(self, pipe: Pipeline) -> None:
        tiny = open_tiny_vae(self.vae_decoder, self.state_dir, pipe.kind == SDXL, self.cache_dir, self.http)
        if tiny is not None:
            pipe.use_tiny_vae(tiny)

    def open_structure(self) -> Pipeline:
        """The pipeline for reading graphs only (the checks): no weights are read ("nocache"), and the
        VAE decoder is not probed as ``load`` does."""
        from frame.diffusion.onnxstream_layout import open_model_files
        from frame.diffusion.pipeline import Pipeline

        files, info = open_model_files(self.source, self.cache_dir, self.http)
        structure_only = dataclasses.replace(self, weights="nocache")
        plan = RenderPlan(vae_tile=self.vae_tile, vae_tile_overlap=self.vae_tile_overlap,
                          memory_limit_mb=self.memory_limit_mb)
        pipe = Pipeline(files, info, structure_only.loader(), plan, http=self.http, noise=self.noise)
        self._use_tiny_vae(pipe)
        return pipe


def engine_weights(weights: str) -> str:
    """The engine's provider name for ``model.weights`` (the schema's "auto" is prefetch)."""
    return AUTO_WEIGHTS if weights == "auto" else weights


def http_settings_for(model: ModelConfig, source: str, state_dir: str | None = None) -> HttpSettings:
    """How the resolved model ``source`` is fetched, from the ``model`` section: timeouts, the token
    (sent to the source's origin only), the weight cache (``model.cache``; its folder defaults to
    ``STATE_DIR/weight-cache``)."""
    cache = model.cache
    cache_dir, cache_bytes = "", 0
    if cache.enabled:
        cache_dir = cache.dir or os.path.join(os.path.expanduser(state_dir or "."), "weight-cache")
        cache_bytes = int(cache.max_mb) << 20
    return HttpSettings(timeout=float(model.http_timeout_seconds), give_up_seconds=float(model.http_give_up_seconds),
                        token=model.token, token_origin=origin(source) if model.token else "",
                        cache_dir=os.path.expanduser(cache_dir), cache_max_bytes=cache_bytes)


def pipeline_setup(config: Config, source: str | None = None, *, capped: bool = True) -> PipelineSetup:
    """The setup for ``source`` (default: ``model.source`` resolved, "demo" = the bundled model).
    ``capped``: the pipeline runs in the render worker, under ``worker.memory_limit_mb``; ``frame
    serve-render`` runs on a desktop outside that cap (no limit known: ``guidance_plan`` shares the
    weight reads)."""
    model = config.model
    source = source or resolve_model_source(model.source)
    state = os.path.expanduser(config.state_dir) if config.state_dir else None
    return PipelineSetup(source, model.cache_dir or None, engine_weights(model.weights), model.attention_slices,
                         model.vae_tile, model.vae_tile_overlap,
                         config.worker.memory_limit_mb if capped else None,
                         http_settings_for(model, source, config.state_dir), model.noise,
                         str(embedding_names.state_folder(config.state_dir)) if config.state_dir else None,
                         tuple(lora_tags.configured_requests(config)),
                         tuple(lora_tags.lora_folders(source, state)),
                         os.path.join(state, PLANS_FOLDER) if state else None, model.vae_decoder, state)


def load_configured_pipeline(config: Config, source: str | None = None, *,
                             vae_peak: VaePeak | None = None) -> Pipeline:
    """The render's pipeline for ``source`` (default ``model.source``): ``pipeline_setup(...).load()``;
    ``vae_peak`` as ``PipelineSetup.load`` takes it."""
    return pipeline_setup(config, source).load(vae_peak=vae_peak)
