"""The read-ahead rule (``frame.diffusion.readahead``) as the estimate applies it: 32 MB only where
the component's counted peak with 32 MB fits the worker's limit, and the projection times each run
with the budget the rule gave it."""

from __future__ import annotations

import pytest

from frame.config import load_config
from frame.diffusion import load_pipeline, readahead
from frame.diffusion.guidance_plan import WORKER_EXTRA_MB
from frame.diffusion.vae.tiles import MARGIN
from frame.engine.plan_costs import PlanCosts, StepCost
from frame.estimate import memory
from frame.estimate.machine import Throughput
from frame.estimate.night import project
from frame.estimate.plan import NightPlan, Run, build_plan, readahead_budget
from frame.estimate.timing import evaluation_time
from frame.models import demo_model_path

MB = 1 << 20
DEFAULT = memory.BUDGETS["prefetch"]
KINDS = {"conv": 1e9, "matmul": 1e9, "attention": 1e9}


def _count(weights_mb: list[int], macs: int = 10**9) -> PlanCosts:
    """One conv step per weight; each holds 50 MB of live activations."""
    steps = [StepCost("Conv", (macs, 0, 0), (macs, 0, 0), 0, 0, (w * MB,), 50 * MB, 50 * MB, 0) for w in weights_mb]
    return PlanCosts("synthetic", {}, steps, sum(weights_mb) * MB, node_count=len(steps))


# 20 MB weights: none is read ahead within 16 MB, one is within 32 MB, so the peak grows by 20 MB
WEIGHTS = [20, 20, 20, 20]


def _peak_mb(count: PlanCosts, budget: int | None) -> float:
    return (memory.component_peak(count, "prefetch", 1, budget) + memory.PIPELINE_BYTES) / MB


def _limit_for(peak_mb: float) -> float:
    """The smallest worker limit whose margin holds ``peak_mb`` + the worker's extra."""
    return (peak_mb + WORKER_EXTRA_MB) / (1 - MARGIN)


def test_the_default_budget_is_the_prefetch_providers_and_32_mb_grows_this_count():
    count = _count(WEIGHTS)
    assert DEFAULT == 16 * MB
    assert _peak_mb(count, readahead.GROWN_BYTES) == pytest.approx(_peak_mb(count, None) + 20)


def test_little_headroom_keeps_16_mb_and_enough_gives_32():
    count = _count(WEIGHTS)
    grown = _peak_mb(count, readahead.GROWN_BYTES)
    # room for the 16 MB peak and up to 19 MB more: not for the 20 MB the larger budget reads ahead
    assert readahead_budget(count, "prefetch", 1, _limit_for(grown) - 0.5) is None
    assert readahead_budget(count, "prefetch", 1, _limit_for(_peak_mb(count, None) + 19)) is None
    assert readahead_budget(count, "prefetch", 1, _limit_for(grown)) == 32 * MB
    assert readahead_budget(count, "prefetch", 1, 10_000) == 32 * MB


@pytest.mark.parametrize("provider", ["http", "nocache", "ram"])
def test_only_the_disk_provider_grows_and_no_limit_means_the_default(provider):
    count = _count(WEIGHTS)
    assert readahead_budget(count, provider, 1, 10_000) is None
    assert readahead_budget(count, "prefetch", 1, None) is None


def test_the_counted_peak_with_the_chosen_budget_never_passes_the_limit():
    count = _count([3, 12, 20, 7, 30, 1, 15, 18, 2])
    for items in (1, 2):
        for limit in range(150, 420):
            budget = readahead_budget(count, "prefetch", items, limit)
            peak = (memory.component_peak(count, "prefetch", items, budget) + memory.PIPELINE_BYTES) / MB
            assert budget in (None, 32 * MB)
            if budget:
                assert peak + WORKER_EXTRA_MB <= limit * (1 - MARGIN)
            assert (budget is None) == (_peak_grown(count, items) + WORKER_EXTRA_MB > limit * (1 - MARGIN))


def _peak_grown(count: PlanCosts, items: int) -> float:
    return (memory.component_peak(count, "prefetch", items, readahead.GROWN_BYTES) + memory.PIPELINE_BYTES) / MB


def test_the_stall_is_timed_with_the_runs_budget():
    """Slow reads (20 MB/s) and ops of 1 s: with 16 MB each 20 MB weight is read when its op asks
    (1 s each op waits), with 32 MB while the previous op computes."""
    count = _count(WEIGHTS)
    rates = Throughput(1e9, 1e9, 0.0, KINDS, read_bytes=20 * MB)
    small = evaluation_time(count, rates, rates.read_bytes, "prefetch")
    large = evaluation_time(count, rates, rates.read_bytes, "prefetch", budget=32 * MB)
    assert small.compute == large.compute == pytest.approx(4.0)
    assert small.stall == pytest.approx(4.0)
    assert large.stall == pytest.approx(1.0)  # only the first weight: nothing computes before it

    def unet_seconds(budget: int | None) -> float:
        plan = NightPlan("x", "/m", 64, 64, 3, "euler", 0.0, False, "sequential")
        plan.runs.append(Run("unet", "unet", count, 1, per_step=True, readahead=budget))
        return project(plan, rates, "prefetch").phases["unet"] - count.load_seconds

    assert unet_seconds(None) == pytest.approx(3 * small.seconds)
    assert unet_seconds(32 * MB) == pytest.approx(3 * large.seconds)
    assert unet_seconds(32 * MB) < unet_seconds(None)


@pytest.fixture(scope="module")
def demo():
    return load_pipeline(demo_model_path())


def test_every_component_but_the_taste_choice_gets_the_rules_budget(demo):
    plan = build_plan(demo, 256, 160, 8, 7.5, "euler_a", memory_limit_mb=440, choose_texts=20)
    budgets = {r.phase: r.readahead for r in plan.runs}
    assert budgets == {"unet": 32 * MB, "text": 32 * MB, "choose": None, "vae": 32 * MB}
    assert plan.readahead == {"unet": 32 * MB, "text_encoder": 32 * MB, "vae_decoder": 32 * MB}
    assert any("32 MB ahead" in note for note in plan.notes)
    tight = build_plan(demo, 256, 160, 8, 7.5, "euler_a", memory_limit_mb=150)
    assert tight.readahead == {} and not any("ahead" in note for note in tight.notes)


def test_the_pi_twins_worker_does_not_grow(demo, tmp_path):
    """The twin's night: the bundled demo model at 256x160 under the default 440 MB limit. Each of its
    components holds less than 16 MB of weights, so reading up to 32 MB ahead reads nothing more: the
    counted peak of every component is the same as with the default budget."""
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  source: demo\n  size: 256x160\n  steps: 8\n", encoding="utf-8")
    config = load_config(path)
    assert config.worker.memory_limit_mb == 440
    plan = build_plan(demo, 256, 160, config.model.steps, config.model.guidance, config.model.sampler,
                      memory_limit_mb=config.worker.memory_limit_mb, choose_texts=20)
    for run in plan.runs:
        assert run.count.weight_bytes < DEFAULT
        assert (memory.component_peak(run.count, "prefetch", run.items, run.readahead)
                == memory.component_peak(run.count, "prefetch", run.items))
