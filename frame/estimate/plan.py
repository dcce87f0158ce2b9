"""What one night runs, component by component, and the input shapes of each run.

A night, as ``frame.worker.render`` and ``frame.diffusion.pipeline`` run it:

1. **choose** (the taste picker; not for a queued prompt): the last text encoder embeds every text
   the picker has not seen: the concept axes' ends, and with a trained taste model the candidate
   pool (themes × styles + feed items) and the rated prompts (``choose_texts``);
2. **text**: each text encoder runs once for the prompt and, with classifier-free guidance, once
   more for the negative prompt;
3. **unet**: per step, with classifier-free guidance, two passes run as the render runs them
   (``guidance_mode_tonight``: the pipeline's ``guidance_mode`` if fixed, else
   ``frame.diffusion.guidance_plan.choose`` on the same kind, size, weight precision and memory
   limit): "shared", one evaluation whose ops each run both passes while their weights are held
   (weights read once, both passes' activations alive); "sequential", two evaluations (weights read
   twice); "batched", one evaluation with a batch of two (weights read once, activations and kernel
   temporaries doubled). Without guidance, one evaluation. Every sampler here (euler, euler_a, ddim,
   dpm++2m, lcm) evaluates the UNet once per step;
4. **vae**: the decoder once per tile, the tiles ``frame.diffusion.vae.tiles.layout_for`` gives the render
   (``vae_tile``, else the fewest whose counted peak fits the memory limit, ``frame.diffusion.vae.tiles``,
   overlapping by ``vae_tile_overlap``), or once on the whole latent when it fits in one tile or the
   export's fixed size cannot be tiled.

Each run but the taste choice reads its weights as far ahead as ``frame.diffusion.readahead`` lets
the render (``Run.readahead``: 32 MB where the component's counted peak leaves room in the memory
limit, else the provider's default), decided after the guidance mode and the tiles.

Every component is loaded, run and closed in turn, so the night's memory peak is the largest one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frame.diffusion import guidance_plan, readahead
from frame.diffusion.conditioning import pass_sizes, texts_per_pass
from frame.diffusion.model_info import SDXL
from frame.diffusion.onnxstream_layout import OnnxStreamFiles
from frame.diffusion.vae.tiles import layout_for
from frame.engine.counted_shapes import Shape
from frame.engine.io.http_settings import HttpSettings
from frame.engine.model import read_structure
from frame.engine.plan_costs import PlanCosts
from frame.estimate import memory
from frame.estimate.choice import minimum_steps
from frame.estimate.counting import count_graph
from frame.estimate.vae import peak_counter

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline
    from frame.diffusion.render_settings import RenderSettings

TOKENS = 77
MB = 1 << 20
AXIS_TEXTS = 12  # the six default concept axes, two ends each (frame.taste.features.DEFAULT_AXES)


@dataclass(frozen=True)
class Run:
    """``evaluations`` of one counted graph (``per_step``: that many per denoising step); each
    evaluation runs ``items`` inputs through every op while its weights are held (2 for the guidance
    passes in "shared" mode: compute twice, weights read once)."""

    phase: str
    name: str
    count: PlanCosts
    evaluations: int
    per_step: bool = False
    items: int = 1
    readahead: int | None = None  # the provider's read-ahead bytes (``frame.diffusion.readahead``; None: default)


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
    guidance_mode: str              # "shared", "sequential" or "batched" (``frame.diffusion.denoise``)
    turbo: bool = False
    runs: list[Run] = field(default_factory=list)
    tiles: int = 1
    notes: list[str] = field(default_factory=list)
    guidance_reason: str = ""       # why that mode (``guidance_plan.choose``'s reason, or the setting)
    counted_peaks_mb: tuple[float, float] | None = None  # ``counted_peaks_mb`` of this UNet at this size
    kept_plans: bool = False        # the components load from plans kept in the state folder (plan_cache)

    @property
    def min_steps(self) -> int:
        return minimum_steps(self.turbo, self.sampler, self.steps)

    @property
    def batched(self) -> bool:
        return self.guided and self.guidance_mode == "batched"

    @property
    def passes(self) -> int:
        """UNet passes computed per step: 2 with guidance (however they run), else 1."""
        return 2 if self.guided else 1

    @property
    def weight_reads(self) -> int:
        """Times the UNet's weights are read per step: 2 only for guidance passes run one after the other."""
        return 2 if self.guided and self.guidance_mode == "sequential" else 1

    def runs_of(self, phase: str) -> list[Run]:
        return [r for r in self.runs if r.phase == phase]

    @property
    def readahead(self) -> dict[str, int]:
        """Read-ahead bytes by component where tonight's differ from the default: what the render
        worker hands the pipeline (its plan's ``readahead``; the taste choice runs before it: default)."""
        return {r.name: r.readahead for r in self.runs if r.readahead and r.phase != "choose"}


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


def _count(source, wanted, http: HttpSettings | None) -> PlanCosts:  # noqa: ANN001

    structure = read_structure(source, http=http)
    return count_graph(source, wanted(declared_inputs(structure)), structure=structure, http=http)


def _vae_run(pipe: Pipeline, latent: tuple[int, int], tile: int | None, overlap: int,
             limit_mb: float | None, http: HttpSettings | None) -> tuple[object, Shape, int, str | None]:
    """(decoder source, input latent size, evaluations, note) for the decode of ``latent``: the layout
    ``frame.diffusion.vae.tiles.layout_for`` gives the render, with the pipeline's own peak function (the
    render worker's, ``frame.estimate.vae.peak_counter``) and memory limit."""
    h, w = latent
    peak_mb = pipe.plan.vae_peak_mb or peak_counter(pipe, http=http)
    if isinstance(pipe.files, OnnxStreamFiles):  # its 32x32 tile decoder, or a whole one (fixed or any size)
        source = pipe.files.vae_for(h, w, None)
        dims = declared_inputs(read_structure(source, http=http)).get("latent_sample", ())
        static = tuple(dims[2:]) if len(dims) == 4 and all(isinstance(d, int) for d in dims[2:]) else None
        layout = layout_for(latent, static, tile, overlap, None, peak_mb, limit_mb)  # type: ignore[arg-type]
        return source, layout.tile, layout.count, None
    source = pipe.vae_source
    shapes = pipe.vae_shapes()
    if shapes.static and not shapes.tileable:
        return source, shapes.static, 1, "the VAE decoder's fixed input size cannot be tiled: decoded whole"
    layout = layout_for(latent, None, tile, overlap, None, peak_mb, limit_mb)
    note = f"VAE decode: {layout.describe()}" if tile is None and layout.count > 1 else None
    return source, layout.tile, layout.count, note


def counted_peaks_mb(unet: PlanCosts, url: bool, weights: str = "prefetch") -> tuple[float, float]:
    """(one-pass, two-pass) render peaks in MB of this UNet's count (``memory.component_peak`` with one
    and with both guidance passes' activations alive, plus what the render worker holds beside it):
    ``guidance_plan.choose``'s ``counted``, so the mode follows this model's own activations.
    ``weights``: the engine provider name the render loads with (``PipelineSetup.weights``)."""
    provider = memory.provider_for(weights, url)
    return tuple(round((memory.component_peak(unet, provider, items) + memory.PIPELINE_BYTES) / MB, 1)
                 for items in (1, 2))  # type: ignore[return-value]


def readahead_budget(count: PlanCosts, provider: str, items: int, limit_mb: float | None) -> int | None:
    """The component's read-ahead bytes as the render gets them (``frame.diffusion.readahead.choose``
    on its counted render peak with the larger budget; None: the provider's default)."""
    def peak_mb(budget: int) -> float:
        return (memory.component_peak(count, provider, items, budget) + memory.PIPELINE_BYTES) / MB

    return readahead.choose(provider, peak_mb, limit_mb)


def guidance_mode_tonight(pipe: Pipeline, settings: RenderSettings, batch_dim: int | str | None, precision: str,
                          requested: str | None, memory_limit_mb: float | None,
                          counted: tuple[float, float] | None = None) -> tuple[str, str]:
    """(mode, reason) as the render decides it: ``frame.diffusion.denoise.GuidedUNet`` (a fixed batch
    of 2 forces "batched"; a fixed batch of 1 cannot batch) after ``Pipeline.guidance_mode_for``
    (``requested`` or the pipeline's ``guidance_mode``, else ``guidance_plan.choose`` on ``counted``:
    the UNet's own peaks, ``counted_peaks_mb``)."""

    if not settings.guided:
        return "sequential", "one UNet pass per step (no guidance)"
    if batch_dim == 2:
        return "batched", "the export's fixed batch of 2 runs both passes as one batch"
    requested = requested or pipe.plan.guidance_mode
    if requested is None:
        plan = guidance_plan.choose(pipe.kind, settings.width, settings.height, precision, memory_limit_mb, True,
                                    counted)
        return plan.mode, plan.reason
    if requested == "batched" and isinstance(batch_dim, int):
        return "sequential", "the export's fixed batch of 1 cannot batch the two passes"
    return requested, f"guidance mode {requested!r} set"


def build_plan(pipe: Pipeline, width: int, height: int, steps: int | None, guidance: float | None,
               sampler: str | None, guidance_mode: str | None = None, memory_limit_mb: float | None = None,
               vae_tile: int | None = None, vae_tile_overlap: int = 8, choose_texts: int = 0,
               choose_tokens: int | None = None, weights: str = "prefetch", http: HttpSettings | None = None,
               kept_plans: bool = False) -> NightPlan:
    """Count every component of ``pipe`` (a ``frame.diffusion.Pipeline``) for one night's settings.

    ``guidance_mode``: how the guidance passes run; None: as tonight's render would run them
    (``guidance_mode_tonight`` with ``memory_limit_mb``, the worker's limit; None there: the
    pipeline's own ``memory_limit_mb``). ``choose_tokens``: the positions a choose pass computes
    (``frame.diffusion.conditioning.through_end_of_text``; None: all 77). ``weights``: the engine
    provider the render reads the weights with (its read-ahead counts in the peaks); ``http``: how the
    render reads a URL model (``PipelineSetup.http``: token, retries, weight cache); ``kept_plans``: the
    render keeps each component's plan between nights (``frame.engine.plan_cache``), so a night after
    the first loads them without planning."""
    settings = pipe.settings("estimate", "negative", steps, guidance, sampler, 0, width, height,
                             warn=False)  # a count: the render says the warnings
    info = pipe.info
    latent = (height // info.vae_factor, width // info.vae_factor)
    structure = read_structure(pipe.unet_source, http=http)
    unet_declared = declared_inputs(structure)
    batch_dim = unet_declared.get("sample", (None,))[0]
    unet = count_graph(pipe.unet_source, unet_shapes(unet_declared, 1, latent), structure=structure, http=http)
    limit = memory_limit_mb if memory_limit_mb is not None else pipe.plan.memory_limit_mb
    peaks = counted_peaks_mb(unet, str(pipe.files.source).startswith(("http://", "https://")), weights)
    mode, reason = guidance_mode_tonight(pipe, settings, batch_dim, unet.precision, guidance_mode, limit, peaks)
    plan = NightPlan(info.label, str(pipe.files.source), width, height, settings.steps, settings.sampler,
                     settings.guidance, settings.guided, mode, info.turbo, guidance_reason=reason,
                     counted_peaks_mb=peaks, kept_plans=kept_plans)
    if plan.batched and batch_dim != 2:
        unet = count_graph(pipe.unet_source, unet_shapes(unet_declared, 2, latent), http=http)
    evaluations = 2 if plan.guided and mode == "sequential" else 1
    items = 2 if plan.guided and mode == "shared" else 1
    provider = memory.provider_for(weights, str(pipe.files.source).startswith(("http://", "https://")))
    plan.runs.append(Run("unet", "unet", unet, evaluations, per_step=True, items=items,
                         readahead=readahead_budget(unet, provider, items, limit)))
    prompts = 2 if settings.guided else 1
    for encoder in pipe.encoders:
        count = _count(encoder.source, lambda d: {k: concrete(v, (1, TOKENS)) for k, v in d.items()}, http)
        plan.runs.append(Run("text", encoder.name, count, prompts,
                             readahead=readahead_budget(count, provider, 1, limit)))
    if choose_texts:  # the picker's texts in shared passes (frame.diffusion.conditioning.pass_sizes)
        last = plan.runs_of("text")[-1]
        count = last.count
        if choose_tokens is not None and 0 < choose_tokens < TOKENS:  # a fixed sequence length stays 77
            count = _count(pipe.encoders[-1].source,
                           lambda d: {k: concrete(v, (1, choose_tokens)) for k, v in d.items()}, http)
        positions = count.input_shapes.get("input_ids", (1, TOKENS))[-1]  # 77 where the export fixes it
        sizes = pass_sizes(choose_texts, texts_per_pass(positions))  # counted as long as the first (+1 at most)
        plan.runs.append(Run("choose", last.name, count, len(sizes), items=sizes[0]))
    source, tile_hw, tiles, note = _vae_run(pipe, latent, vae_tile, vae_tile_overlap, limit, http)
    # at the tile size even where the export declares another (the render overrides it, vae.shapes)
    decoder = _count(source, lambda d: {k: (1, 4, *tile_hw) for k in d}, http)
    plan.runs.append(Run("vae", "vae_decoder", decoder, tiles,
                         readahead=readahead_budget(decoder, provider, 1, limit)))
    plan.tiles = tiles
    if note:
        plan.notes.append(note)
    if readahead.describe(plan.readahead):
        plan.notes.append(readahead.describe(plan.readahead))
    if info.kind == SDXL and settings.guided and not info.force_zeros_for_empty_prompt:
        plan.notes.append("SDXL negative prompt encoded by both text encoders")
    return plan


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
