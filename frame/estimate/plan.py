"""What one night runs, component by component, and the input shapes of each run.

A night, as ``frame.worker.render`` and ``frame.diffusion.pipeline`` run it:

1. **choose** (the taste picker; not for a queued prompt): the last text encoder embeds every text
   the picker has not seen: the concept axes' ends, and with a trained taste model the candidate
   pool (themes × styles + feed items) and the rated prompts (``choose_texts``);
2. **text**: each text encoder runs once for the prompt and, with classifier-free guidance, once
   more for the negative prompt;
3. **unet**: per step, one UNet evaluation per guidance pass, or one evaluation with a batch of two
   when the passes are batched (both sets of activations at once, the weights read once). Every
   sampler here (euler, euler_a, ddim, dpm++2m, lcm) evaluates the UNet once per step;
4. **vae**: the decoder once per tile (tiles of ``vae_tile`` latent pixels overlapping by
   ``vae_tile_overlap``, ``frame.diffusion.vae``), or once on the whole latent when it fits in one
   tile or the export's fixed size cannot be tiled.

Every component is loaded, run and closed in turn, so the night's memory peak is the largest one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from frame.diffusion.model_info import SDXL
from frame.diffusion.vae import tile_starts
from frame.estimate.counting import GraphCount, count_graph
from frame.estimate.shapes import Shape

TOKENS = 77
AXIS_TEXTS = 12  # the six default concept axes, two ends each (frame.taste.features.DEFAULT_AXES)


@dataclass(frozen=True)
class Run:
    """``evaluations`` of one counted graph (``per_step``: that many per denoising step)."""

    phase: str
    name: str
    count: GraphCount
    evaluations: int
    per_step: bool = False


@dataclass
class NightPlan:
    """The runs of one night and the settings they follow from."""

    label: str
    source: str
    width: int
    height: int
    steps: int
    sampler: str
    guidance: float
    guided: bool
    batched: bool
    turbo: bool = False
    runs: list[Run] = field(default_factory=list)
    tiles: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def min_steps(self) -> int:
        from frame.estimate.choice import minimum_steps

        return minimum_steps(self.turbo, self.sampler, self.steps)

    @property
    def passes(self) -> int:
        """UNet evaluations per step (the weights are read once per evaluation)."""
        return 1 if self.batched or not self.guided else 2

    def runs_of(self, phase: str) -> list[Run]:
        return [r for r in self.runs if r.phase == phase]


def declared_inputs(structure) -> dict[str, tuple]:  # noqa: ANN001 - read_structure's result
    """Graph inputs (not weights) with their declared dims (ints; None or a name where dynamic)."""
    inputs = {}
    for value in structure.proto.graph.input:
        if value.name in structure.weights:
            continue
        tensor = value.type.tensor_type
        dims = tuple((d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or None))
                     for d in tensor.shape.dim) if tensor.HasField("shape") else ()
        inputs[value.name] = dims
    return inputs


def concrete(dims: tuple, wanted: tuple[int, ...]) -> tuple[int, ...]:
    """``dims`` with every dynamic dim replaced by the matching entry of ``wanted`` (same rank)."""
    if len(dims) != len(wanted):
        return wanted
    return tuple(d if isinstance(d, int) else w for d, w in zip(dims, wanted))


def unet_shapes(declared: dict[str, tuple], batch: int, latent: tuple[int, int]) -> dict[str, tuple[int, ...]]:
    """Feeds as ``frame.diffusion.denoise.GuidedUNet`` builds them, by each input's role."""
    h, w = latent
    shapes = {}
    for name, dims in declared.items():
        if name == "timestep" or (len(dims) <= 1 and name not in ("text_embeds", "time_ids")):
            shapes[name] = concrete(dims, (1,)) if dims else ()
        elif len(dims) == 4:
            shapes[name] = concrete(dims, (batch, 4, h, w))
        elif len(dims) == 3:
            shapes[name] = concrete(dims, (batch, TOKENS, dims[2] if isinstance(dims[2], int) else 768))
        elif name == "time_ids":
            shapes[name] = concrete(dims, (batch, 6))
        else:
            shapes[name] = concrete(dims, (batch, dims[1] if isinstance(dims[1], int) else 1280))
    return shapes


def _count(source, wanted) -> GraphCount:  # noqa: ANN001
    from frame.engine.model import read_structure

    structure = read_structure(source)
    return count_graph(source, wanted(declared_inputs(structure)), structure=structure)


def _vae_run(pipe, latent: tuple[int, int], tile: int, overlap: int) -> tuple[object, Shape, int, str | None]:  # noqa: ANN001
    """(decoder source, input latent size, evaluations, note) for the decode of ``latent``."""
    from frame.diffusion.onnxstream_layout import OnnxStreamFiles

    h, w = latent
    if isinstance(pipe.files, OnnxStreamFiles):
        source = pipe.files.vae_for(h, w, None)
        tile = 32 if source != pipe.vae_source else max(h, w)
    else:
        source = pipe.vae_source
        shapes = pipe.vae_shapes()
        if shapes.static and not shapes.tileable:
            return source, shapes.static, 1, "the VAE decoder's fixed input size cannot be tiled: decoded whole"
        if shapes.static and shapes.static[0] >= h and shapes.static[1] >= w:
            tile = shapes.static[0]
    th, tw = min(tile, h), min(tile, w)
    tiles = len(tile_starts(h, th, overlap)) * len(tile_starts(w, tw, overlap))
    return source, (th, tw), tiles, None


def build_plan(pipe, width: int, height: int, steps: int | None, guidance: float | None, sampler: str | None,  # noqa: ANN001
               cfg_batch: bool = False, vae_tile: int = 32, vae_tile_overlap: int = 8,
               choose_texts: int = 0) -> NightPlan:
    """Count every component of ``pipe`` (a ``frame.diffusion.Pipeline``) for one night's settings."""
    settings = pipe.settings("estimate", "negative", steps, guidance, sampler, 0, width, height)
    info = pipe.info
    latent = (height // info.vae_factor, width // info.vae_factor)
    structure = _structure(pipe.unet_source)
    unet_declared = declared_inputs(structure)
    batch_dim = unet_declared.get("sample", (None,))[0]
    can_batch = not isinstance(batch_dim, int) or batch_dim == 2
    batched = settings.guided and can_batch and (cfg_batch or batch_dim == 2)
    plan = NightPlan(info.label, str(pipe.files.source), width, height, settings.steps, settings.sampler,
                     settings.guidance, settings.guided, batched, info.turbo)
    batch = 2 if batched else 1
    unet = count_graph(pipe.unet_source, unet_shapes(unet_declared, batch, latent), structure=structure)
    plan.runs.append(Run("unet", "unet", unet, 1 if batched or not settings.guided else 2, per_step=True))
    prompts = 2 if settings.guided else 1
    for encoder in pipe.encoders:
        count = _count(encoder.source, lambda d: {k: concrete(v, (1, TOKENS)) for k, v in d.items()})
        plan.runs.append(Run("text", encoder.name, count, prompts))
    if choose_texts:
        last = plan.runs_of("text")[-1]
        plan.runs.append(Run("choose", last.name, last.count, choose_texts))
    source, tile_hw, tiles, note = _vae_run(pipe, latent, vae_tile, vae_tile_overlap)
    vae = _count(source, lambda d: {k: concrete(v, (1, 4, *tile_hw)) for k, v in d.items()})
    plan.runs.append(Run("vae", "vae_decoder", vae, tiles))
    plan.tiles = tiles
    if note:
        plan.notes.append(note)
    if info.kind == SDXL and settings.guided and not info.force_zeros_for_empty_prompt:
        plan.notes.append("SDXL negative prompt encoded by both text encoders")
    return plan


def _structure(source):  # noqa: ANN001, ANN202
    from frame.engine.model import read_structure

    return read_structure(source)


def choose_texts(config, ratings: int | None = None, feed_items: int = 0, rated_prompts: int | None = None) -> int:  # noqa: ANN001
    """Texts the taste picker embeds in one night (``frame.taste.picker``): the axes' ends and the
    chosen prompt while it chooses for variety (fewer than ``taste.min_ratings`` ratings), else also
    every candidate and rated prompt. ``ratings=None`` (no store at hand) assumes a trained model."""
    axes = 2 * len(config.taste.axes) if config.taste.axes else AXIS_TEXTS
    if ratings is not None and ratings < config.taste.min_ratings:
        return axes + 1
    pool = len(config.taste.themes) * max(1, len(config.taste.styles)) + feed_items
    return axes + pool + (rated_prompts if rated_prompts is not None else (ratings or 0)) + 1


def local_path(source) -> str | None:  # noqa: ANN001
    text = str(source)
    return None if text.startswith(("http://", "https://")) or not os.path.exists(text) else text
