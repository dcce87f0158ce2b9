"""The projected night: the plan's runs timed at a machine's rates, the peak, the bytes read.

night = worker start + Σ component loads + choose + text + steps × (UNet per step) + vae

UNet per step, by guidance mode (``frame.diffusion.guidance_plan``): "sequential" 2 evaluations
(weights read twice), "shared" 1 evaluation whose ops compute both passes (weights read once),
"batched" 1 evaluation at batch 2 (weights read once); 1 evaluation without guidance.

Each evaluation is ``frame.estimate.timing.evaluation_time`` (compute overlapped with weight reads
at the storage's rate). On this machine the loads are measured (loading is what counting does); a
machine described by constants (the Pi, ``frame.estimate.pi``) sets its worker start and its load
cost per graph node instead, so its projection depends on the count alone. A night whose plans are
kept (``NightPlan.kept_plans``: the render keeps each component's plan in the state folder,
``frame.engine.plan_cache``) loads each component at ``pi.KEPT_PLAN_LOAD_SHARE`` of that cost; the
first night plans them (``first_night_extra``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from frame.estimate import memory, pi
from frame.estimate.machine import Throughput
from frame.estimate.plan import NightPlan, Run
from frame.estimate.timing import evaluation_time

WORKER_START_SECONDS = 2.0  # imports of a render worker here (docs/benchmarks-pi.md footprint table: 1.4-1.9 s wall)
PHASES = ("start", "choose", "text", "unet", "vae")


@dataclass
class Projection:
    """A night on one machine: seconds per phase and per denoising step."""

    label: str
    phases: dict[str, float]
    step_seconds: float            # one denoising step (all its passes)
    read_bytes: float | None       # storage or link rate used
    stall_share: float = 0.0       # share of UNet time spent waiting for weights

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())

    def seconds_with_steps(self, steps: int, planned: int) -> float:
        return self.seconds + (steps - planned) * self.step_seconds


@dataclass
class NightEstimate:
    plan: NightPlan
    projections: list[Projection]
    peak_bytes: int
    peak_phase: str
    provider: str
    bytes_per_step: int
    bytes_per_night: int
    macs_per_step: int
    url: bool
    notes: list[str] = field(default_factory=list)

    @property
    def here(self) -> Projection:
        return self.projections[0]


def _run_seconds(run: Run, rates: Throughput, provider: str) -> tuple[float, float, float]:
    """(seconds of all evaluations, stall seconds, compute seconds) of a run (per step for UNet runs)."""
    rates = rates.within(run.count.steps)  # unprobed signatures at this component's own averages
    first = evaluation_time(run.count, rates, rates.read_bytes, provider, True, run.items, run.readahead)
    later = evaluation_time(run.count, rates, rates.read_bytes, provider, False, run.items, run.readahead)
    total = first.seconds + later.seconds * (run.evaluations - 1)
    stall = first.stall + later.stall * (run.evaluations - 1)
    return total, stall, first.compute + later.compute * (run.evaluations - 1)


def planning_seconds(run: Run, rates: Throughput) -> float:
    """Loading ``run``'s component when its graph is parsed and planned (the first night's load)."""
    per_node = rates.load_seconds_per_node
    return run.count.load_seconds if per_node is None else run.count.node_count * per_node


def load_seconds(plan: NightPlan, run: Run, rates: Throughput) -> float:
    """Loading ``run``'s component tonight: from its kept plan when ``plan.kept_plans``."""
    return planning_seconds(run, rates) * (pi.KEPT_PLAN_LOAD_SHARE if plan.kept_plans else 1.0)


def first_night_extra(plan: NightPlan, rates: Throughput) -> float:
    """Seconds the first night (no plans kept yet: a new model, an upgrade) adds to ``plan``'s."""
    if not plan.kept_plans:
        return 0.0
    return sum(planning_seconds(run, rates) - load_seconds(plan, run, rates) for run in plan.runs)


def project(plan: NightPlan, rates: Throughput, provider: str, load_factor: float = 1.0) -> Projection:
    phases = {phase: 0.0 for phase in PHASES}
    start = rates.worker_start_seconds
    phases["start"] = (WORKER_START_SECONDS if start is None else start) * load_factor
    step = stall = 0.0
    for run in plan.runs:
        seconds, waited, _ = _run_seconds(run, rates, provider)
        phases[run.phase] += load_seconds(plan, run, rates) * load_factor
        if run.per_step:
            step += seconds
            stall += waited
            phases[run.phase] += seconds * plan.steps
        else:
            phases[run.phase] += seconds
    return Projection(rates.label, phases, step, rates.read_bytes, stall / step if step else 0.0)


def bytes_read(plan: NightPlan) -> tuple[int, int]:
    """(weight bytes per denoising step, weight bytes per night) read from storage or the link
    (a shared run's items read each weight once: ``items`` does not count)."""
    per_step = sum(r.count.weight_bytes * r.evaluations for r in plan.runs if r.per_step)
    rest = sum(r.count.weight_bytes * r.evaluations for r in plan.runs if not r.per_step)
    return per_step, per_step * plan.steps + rest


def peak(plan: NightPlan, provider: str) -> tuple[int, str]:
    """(bytes, phase) of the night's largest component peak (``memory.component_peak``). Nothing is added
    for the taste model: it runs in its own short child (``frame.worker.tastechild``), which exits before
    the text encoder, the UNet and the VAE load. Adding its 79 MB to them (when the ratings were not
    known: tonight's step choice) made the settings page say 217 MB where ``frame estimate`` said 138."""
    best, where = 0, ""
    for run in plan.runs:
        value = memory.component_peak(run.count, provider, run.items, run.readahead) + memory.PIPELINE_BYTES
        if value > best:
            best, where = value, run.phase
    return best, where


def estimate_night(plan: NightPlan, machines: list[tuple[Throughput, float]],
                   weights: str = "prefetch") -> NightEstimate:
    """Project ``plan`` on each ``(rates, load factor)``; the first is this machine."""
    url = plan.source.startswith(("http://", "https://"))
    provider = memory.provider_for(weights, url)
    projections = [project(plan, rates, provider, factor) for rates, factor in machines]
    per_step, per_night = bytes_read(plan)
    unet = plan.runs_of("unet")
    macs = sum(r.count.macs * r.evaluations * r.items for r in unet)
    top, phase = peak(plan, provider)
    return NightEstimate(plan, projections, top, phase, provider, per_step, per_night, macs, url, list(plan.notes))
