"""The estimate for a configuration: what ``frame estimate``, ``frame config check`` and the night use.

``estimate_config(config)`` opens the configured model (small files only), counts every component
at the night's size and settings (``frame.estimate.plan``), measures this machine
(``frame.estimate.machine``; the model's heaviest step signatures, the model's storage or link;
``rates_dir``: reuse a recent measurement kept in the state folder), and projects the night here and
on a Raspberry Pi Zero 2 W (``frame.estimate.pi``: from the count and the Pi's constants only, never
this machine's measurement). The model is opened as the render opens it (``pipeline_setup``:
``model.token``, a URL's ``user:password@``, timeouts), and counted under the same HTTP settings. With guidance
the night's plan runs the two passes the way tonight's render will (``frame.estimate.plan.
guidance_mode_tonight``: ``frame.diffusion.guidance_plan.choose`` on the model's kind, the size, the
UNet weights' precision and ``worker.memory_limit_mb``), and the alternative is the other sensible
mode (``alternative_mode``): "sequential" when tonight shares the weight reads, else "shared".
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from frame.config import state_dir
from frame.diffusion.configured import PipelineSetup, pipeline_setup
from frame.diffusion.sizes import night_size
from frame.engine import onnxstream
from frame.engine.io.http_settings import HttpSettings
from frame.engine.model import read_structure
from frame.estimate import pi, step_history, vae
from frame.estimate.machine import Throughput, component_leaders, heaviest_signatures, measure_throughput, read_rate
from frame.estimate.new_texts import TonightTexts, count_new_for
from frame.estimate.night import NightEstimate, estimate_night, first_night_extra
from frame.estimate.plan import NightPlan, build_plan, choose_texts
from frame.estimate.rates_file import FILE, MAX_AGE_SECONDS, load_rates, save_rates

if TYPE_CHECKING:
    from frame.config.schema import Config, ScheduleConfig
    from frame.diffusion.pipeline import Pipeline

log = logging.getLogger(__name__)


@dataclass
class ConfiguredEstimate:
    """The estimate of the night as configured (``estimate``) and of the other way to run guidance."""

    estimate: NightEstimate
    alternative: NightEstimate | None
    rates: Throughput
    window_seconds: float
    window: str
    memory_limit_bytes: int
    measured_read: str | None = None
    notes: list[str] = field(default_factory=list)
    vae_label: str = ""  # what tonight decodes with (frame.estimate.vae)
    other_vae: NightEstimate | None = None  # the same night with the other VAE (full <-> tiny)
    other_vae_label: str = ""


def window_seconds(schedule: ScheduleConfig) -> float:
    """Seconds from ``schedule.render_at`` to ``schedule.deadline`` (a full day when equal), as
    ``frame.daemon.schedule`` opens the night."""
    def minutes(text: str) -> int:
        hour, minute = text.split(":")
        return int(hour) * 60 + int(minute)

    span = (minutes(schedule.deadline) - minutes(schedule.render_at)) % (24 * 60) or 24 * 60
    return float(span * 60)


def alternative_mode(tonight: str) -> str:
    """The other way worth showing: the least memory ("sequential") when tonight reads the weights
    once, else the weights read once per step ("shared": the same reads as "batched", less memory)."""
    return "sequential" if tonight in ("shared", "batched") else "shared"


def weight_location(source: str | onnxstream.OnnxStreamSource, http: HttpSettings | None = None) -> str | None:
    """The biggest weight file of a component source (local path or URL), for the read-rate probe."""
    text = str(source.weights_folder or source) if isinstance(source, onnxstream.OnnxStreamSource) else str(source)
    if text.startswith(("http://", "https://")):  # the file holding the largest weight (data file or model.onnx)
        refs = [r for r in read_structure(source, http=http).weights.values() if r.location]
        return max(refs, key=lambda r: r.nbytes).location if refs else None
    path = Path(text)
    folder = path if path.is_dir() else path.parent
    files = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    return str(max(files, key=lambda p: p.stat().st_size)) if files else None


def keeps_plans(setup: PipelineSetup) -> bool:
    """Whether the render keeps its components' plans between nights (``frame.engine.plan_cache``): a
    state folder, a local ONNX model (not a URL, not an OnnxStream folder) and no LoRA."""
    source = str(setup.source)
    return bool(setup.plans_dir) and not setup.loras and not source.startswith(("http://", "https://")) \
        and not onnxstream.is_onnxstream_source(source)


def _plans(pipe: Pipeline, config: Config, setup: PipelineSetup, size: tuple[int, int], steps: int | None, texts: int,
           alternative: bool, tokens: int | None = None) -> tuple[NightPlan, NightPlan | None]:
    """Tonight's plan and, with guidance and ``alternative``, the other mode's (None when the export's
    fixed batch leaves no other way)."""
    model = config.model
    kwargs = dict(vae_tile=setup.vae_tile, vae_tile_overlap=setup.vae_tile_overlap, choose_texts=texts,
                  choose_tokens=tokens, memory_limit_mb=setup.memory_limit_mb, weights=setup.weights,
                  http=setup.http, kept_plans=keeps_plans(setup))
    tonight = build_plan(pipe, *size, steps, model.guidance, model.sampler, **kwargs)
    if not tonight.guided or not alternative:
        return tonight, None
    other = build_plan(pipe, *size, steps, model.guidance, model.sampler,
                       guidance_mode=alternative_mode(tonight.guidance_mode), **kwargs)
    return tonight, other if other.guidance_mode != tonight.guidance_mode else None


def estimate_config(config: Config, pipe: Pipeline | None = None, steps: int | None = None,
                    size: tuple[int, int] | None = None,
                    measure_seconds: float = 8.0, link_bytes: float | None = None, ratings: int | None = None,
                    rates: Throughput | None = None, texts: int | TonightTexts | None = None,
                    cpu: bool = False, alternative: bool = True, rates_dir: Path | None = None,
                    choose_tokens: int | None = None) -> ConfiguredEstimate:
    """The whole estimate (see the module docstring). ``pipe``: an already loaded pipeline;
    ``ratings``: how many pictures are rated (None: unknown, assume a trained taste model, which embeds
    every text; the peak does not depend on it);
    ``rates``: measured throughput to reuse (skips the measurement); ``texts``: how many texts the
    prompt choice embeds (default: every text the taste settings name; 0 for a queued prompt; a
    ``TonightTexts``: those of them not kept in the state folder, ``frame.estimate.new_texts``); ``cpu``: rates per
    CPU second instead of wall second (projects CPU time on a shared machine); ``alternative``: also
    count the other way to run the guidance passes (not needed to choose tonight's steps); ``rates_dir``:
    reuse the measurement kept there when recent enough, else keep the new one there
    (``frame.estimate.rates_file``); ``choose_tokens``: the most token positions of those texts (None:
    77; from a ``TonightTexts``: its new texts' own)."""

    setup = pipeline_setup(config)  # as the render's: model.token, the URL's user:password, timeouts, cache
    if pipe is None:
        pipe = setup.load()
    return _estimate(config, setup, pipe, steps, size, measure_seconds, link_bytes, ratings, rates, texts, cpu,
                     alternative, rates_dir, choose_tokens)


def _estimate(config: Config, setup: PipelineSetup, pipe: Pipeline, steps: int | None, size: tuple[int, int] | None,
              measure_seconds: float, link_bytes: float | None, ratings: int | None, rates: Throughput | None,
              texts: int | TonightTexts | None, cpu: bool, alternative: bool, rates_dir: Path | None,
              choose_tokens: int | None) -> ConfiguredEstimate:
    model = config.model
    if pipe.plan.vae_peak_mb is None:  # as the render worker's plan has it: the same VAE tiles
        pipe.use_plan(dataclasses.replace(pipe.plan, vae_peak_mb=vae.peak_counter(pipe, setup.weights, setup.http)))
    size = size or night_size(config, pipe)
    if isinstance(texts, TonightTexts):  # only the texts not kept from earlier nights are embedded
        texts, choose_tokens = count_new_for(pipe, texts, state_dir(config))
    texts = choose_texts(config, ratings) if texts is None else texts
    tonight, other = _plans(pipe, config, setup, size, steps if steps is not None else model.steps, texts, alternative,
                            choose_tokens)
    measured = None
    weighted = [(r.count.steps, r.evaluations * r.items * (tonight.steps if r.per_step else 1)) for r in tonight.runs]
    reused = None
    if rates is None and rates_dir is not None:
        rates = reused = load_rates(rates_dir, component_leaders(weighted))
    if rates is None:
        rates = measure_throughput(heaviest_signatures(weighted), budget_seconds=measure_seconds, cpu=cpu,
                                   required=component_leaders(weighted))
        location = weight_location(pipe.unet_source, setup.http)  # counting and the read probe fetch as
        if location:                                               # the render does (setup.http)
            rates = rates.with_read(read_rate(location, http=setup.http))
            measured = location
        if rates_dir is not None:
            save_rates(rates_dir, rates)
    url = str(pipe.files.source).startswith(("http://", "https://"))
    swapped = vae.other_vae(pipe, setup) if alternative else None
    vae_plan = _plans(swapped[1], config, setup, size, steps if steps is not None else model.steps, texts, False,
                      choose_tokens)[0] if swapped else None
    signatures = [s.signature for plan in (tonight, other, vae_plan) if plan for r in plan.runs for s in r.count.steps
                  if s.signature is not None]
    machines = [(rates, 1.0), (pi.pi_throughput(signatures, link_bytes, url), 1.0)]  # the Pi: count + constants
    first = estimate_night(tonight, machines, setup.weights)
    second = estimate_night(other, machines, setup.weights) if other else None
    extra = first_night_extra(tonight, machines[1][0])
    if extra:
        first.notes.append(f"the first night (a new model, or after an upgrade) plans each model once: "
                           f"{extra:.0f} s more on a {pi.LABEL}; the plans are kept in {setup.plans_dir}")
    kept = step_history.load(state_dir(config)).get(step_history.config_key(config, size, tonight), []) \
        if config.state_dir else []  # the step times this device measured on earlier nights
    first.notes.extend(step_history.learned_note(kept, first.here.step_seconds, first.projections[1].step_seconds,
                                                 pi.LABEL))
    if reused is not None:
        first.notes.append(f"this machine's figures reuse its measurement kept in {Path(rates_dir) / FILE} "
                           f"(under {MAX_AGE_SECONDS // 86400} days old); frame estimate measures again")
    window = f"{config.schedule.render_at}-{config.schedule.deadline}"
    return ConfiguredEstimate(first, second, rates, window_seconds(config.schedule), window,
                              config.worker.memory_limit_mb * 1024 * 1024, measured,
                              vae_label=vae.vae_label(pipe),
                              other_vae=estimate_night(vae_plan, machines, setup.weights) if vae_plan else None,
                              other_vae_label=swapped[0] if swapped else "")
