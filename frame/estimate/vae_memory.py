"""The VAE decoder's counted peak at a tile size: what ``frame.diffusion.vae.tiles.choose`` fits to the
worker's memory limit, in the render and in the estimate alike.

``peak_counter(pipe)`` returns a function of the tile (height, width) in latent pixels: the decoder's
graph counted at that input (``counting.count_graph``; weights are not read, only the structure and
small constants) and ``memory.component_peak`` with the provider a night uses, plus what the render
worker holds beside it (``memory.PIPELINE_BYTES``), in MB. A count takes 0.05-0.5 s for the full-size
SD decoder here and is kept per tile size. The render worker and ``frame render`` hand it to
``PipelineSetup.load(vae_peak=...)``, which puts it in the pipeline's plan (``RenderPlan.vae_peak_mb``);
``frame.estimate.plan`` takes the same function, so both choose the same
tiles. A decoder that cannot be counted at a tile size (an export whose ops bake its size) gives None,
and the layout falls back to ``vae.tiles.DEFAULT_TILE``.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from typing import Any

from frame.engine.io.http_settings import HttpSettings
from frame.engine.memory import trim_free_memory
from frame.estimate import memory
from frame.estimate.counting import count_graph

log = logging.getLogger(__name__)

MB = 1 << 20
LATENT = "latent_sample"


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
