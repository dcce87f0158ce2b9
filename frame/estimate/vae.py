"""The VAE in the estimate: the decoder's counted peak per tile, and the night with the other VAE.

``peak_counter(pipe)`` is what ``frame.diffusion.vae.tiles.choose`` fits to the worker's memory limit,
in the render and in the estimate alike. It returns a function of the tile (height, width) in latent
pixels: the decoder's graph counted at that input (``counting.count_graph``; weights are not read, only
the structure and small constants) and ``memory.component_peak`` with the provider a night uses, plus
what the render worker holds beside it (``memory.PIPELINE_BYTES``), in MB. A count takes 0.05-0.5 s for
the full-size SD decoder here and is kept per tile size. The render worker and ``frame render`` hand it
to ``PipelineSetup.load(vae_peak=...)``, which puts it in the pipeline's plan
(``RenderPlan.vae_peak_mb``); ``frame.estimate.plan`` takes the same function, so both choose the same
tiles. A decoder that cannot be counted at a tile size (an export whose ops bake its size) gives None,
and the layout falls back to ``vae.tiles.DEFAULT_TILE``.

``other_vae`` is the night with the other VAE, for ``frame estimate``'s side-by-side line: the full
AutoencoderKL when ``model.vae_decoder`` names a tiny VAE, else the tiny one of the model's family
(taesd, taesdxl) when it is in the state folder (``frame model import --tiny-vae``). The tiny
decoder's work and memory are counted from its own graph like any component's (``frame.estimate.plan``
counts ``pipe.vae_source``); only the pipeline's VAE differs between the two plans.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from frame.diffusion.configured import PipelineSetup
from frame.diffusion.model_info import SDXL
from frame.diffusion.vae.tiny import open_tiny_vae
from frame.engine.io.http_settings import HttpSettings
from frame.engine.memory import trim_free_memory
from frame.errors import FrameError
from frame.estimate import memory
from frame.estimate.counting import count_graph

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline

log = logging.getLogger(__name__)

MB = 1 << 20
LATENT = "latent_sample"
FULL = "the model's own VAE"


def count_at(source: Any, tile: tuple[int, int], http: HttpSettings | None = None) -> Any:
    """``count_graph`` of the decoder at ``source`` for one (1, 4, height, width) latent tile (a fixed
    declared size is overridden: the render runs such a decoder at the tile size too)."""
    return count_graph(source, {LATENT: (1, 4, *tile)}, http=http)


def peak_counter(pipe: Any, weights: str = "prefetch",
                 http: HttpSettings | None = None) -> Callable[[tuple[int, int]], float | None]:
    """MB the render worker peaks at while ``pipe``'s VAE decoder decodes one tile of that size.
    ``weights``: the engine provider name (``PipelineSetup.weights``: "auto" already resolved);
    ``http``: how a URL decoder is read (``PipelineSetup.http``, the pipeline's own)."""
    url = str(pipe.files.source).startswith(("http://", "https://"))
    provider = memory.provider_for(weights, url)
    source = pipe.vae_source
    kept: dict[tuple[int, int], float | None] = {}

    def peak_mb(tile: tuple[int, int]) -> float | None:
        tile = (int(tile[0]), int(tile[1]))
        if tile not in kept:
            try:
                count = count_at(source, tile, http)
                kept[tile] = round((memory.component_peak(count, provider) + memory.PIPELINE_BYTES) / MB, 1)
            except Exception as exc:  # noqa: BLE001 - an uncountable decoder keeps the default tile
                log.info("vae_decoder not counted at %dx%d (%s): the default tile", *tile, exc)
                kept[tile] = None
            finally:
                gc.collect()
                trim_free_memory()  # the counted structure is garbage now; the decoder loads next
        return kept[tile]

    return peak_mb


def family_name(pipe: Pipeline) -> str:
    """The tiny VAE that decodes this model's latents."""
    return "taesdxl" if pipe.kind == SDXL else "taesd"


def other_vae(pipe: Pipeline, setup: PipelineSetup) -> tuple[str, Pipeline] | None:
    """(label, a copy of ``pipe`` decoding with the other VAE), or None when there is no other to count."""
    other = copy.copy(pipe)
    if pipe.tiny_vae is not None:
        other.tiny_vae = None
        other.vae_source = pipe.files.onnx("vae_decoder")
        label = FULL
    else:
        name = family_name(pipe)
        try:
            tiny = open_tiny_vae(name, setup.state_dir, pipe.kind == SDXL, setup.cache_dir, setup.http)
        except FrameError as exc:  # not imported (the usual case): nothing to put beside tonight's
            log.debug("no %s to count beside the full VAE: %s", name, exc)
            return None
        other.use_tiny_vae(tiny)
        label = f"the tiny VAE ({name})"
    other._vae_shapes = None
    other.use_plan(dataclasses.replace(other.plan, vae_peak_mb=peak_counter(other, setup.weights, setup.http)))
    return label, other


def vae_label(pipe: Pipeline) -> str:
    """What tonight decodes with, for the report."""
    return FULL if pipe.tiny_vae is None else f"the tiny VAE ({pipe.tiny_vae.source})"
