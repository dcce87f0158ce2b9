"""The estimate runs the guidance passes the way tonight's render does (``guidance_plan.choose``):
bytes per step, the mode and the step time of "shared", "sequential" and "batched" on the demo model."""

from __future__ import annotations

import numpy as np
import pytest

from frame.config import load_config
from frame.diffusion import guidance_plan, load_pipeline
from frame.engine import load_model
from frame.estimate.configured import alternative_mode, estimate_config
from frame.estimate.machine import Throughput
from frame.estimate.night import estimate_night
from frame.estimate.plan import build_plan, counted_peaks_mb
from frame.estimate.timing import evaluation_time
from frame.models import demo_model_path

KINDS = {"conv": 2e9, "matmul": 2e9, "attention": 2e9}
RATES = Throughput(2e9, 4e9, 1e-5, KINDS, read_bytes=50e6)


@pytest.fixture(scope="module")
def demo():
    return load_pipeline(demo_model_path())


def _feeds(unet, count, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    specs = {i.name: i for i in unet.inputs}
    return {name: rng.standard_normal(shape).astype(specs[name].dtype or np.float32)
            for name, shape in count.input_shapes.items()}


def test_shared_guided_sd15_reads_one_unets_weights_per_step_as_the_engine_does(demo):
    plan = build_plan(demo, 256, 256, 8, 7.5, "euler_a", guidance_mode="shared")
    unet = plan.runs_of("unet")[0]
    assert (plan.guidance_mode, plan.passes, plan.weight_reads, unet.evaluations, unet.items) == ("shared", 2, 1, 1, 2)
    night = estimate_night(plan, [(RATES, 1.0)])
    assert night.bytes_per_step == unet.count.weight_bytes
    assert night.macs_per_step == 2 * unet.count.macs
    # a real shared run of both passes on the demo UNet fetches exactly those bytes (framing aside)
    model = load_model(str(demo.unet_source))
    try:
        feeds = [_feeds(model, unet.count, seed) for seed in (1, 2)]
        model.run_shared(feeds)
        shared = model.last_run_fetched.total_bytes
    finally:
        model.close()
    weights = sum(ref.nbytes for ref in model.streamed_weights)
    assert weights == night.bytes_per_step
    assert night.bytes_per_step <= shared < 1.01 * night.bytes_per_step  # + protobuf framing read along
    sequential = estimate_night(build_plan(demo, 256, 256, 8, 7.5, "euler_a", guidance_mode="sequential"),
                                [(RATES, 1.0)])
    assert sequential.bytes_per_step == 2 * night.bytes_per_step


def test_shared_computes_twice_but_overlaps_one_read():
    from frame.engine.plan_costs import PlanCosts, StepCost

    steps = [StepCost("Conv", (10**9, 0, 0), (10**9, 0, 0), 0, 0, (8 << 20,), 1 << 20, 8 << 20, 0)
             for _ in range(4)]
    count = PlanCosts("x", {}, steps, 32 << 20, 4)
    slow = Throughput(1e9, 1e9, 0.0, {"conv": 1e9, "matmul": 1e9, "attention": 1e9}, read_bytes=4e6)
    one = evaluation_time(count, slow, slow.read_bytes, "prefetch")
    two = evaluation_time(count, slow, slow.read_bytes, "prefetch", items=2)
    assert two.compute == pytest.approx(2 * one.compute)
    assert two.read == one.read  # the weights once
    # the read dominates on a slow link: two passes cost about one read, not two
    assert two.seconds < 1.25 * one.seconds < 2 * one.seconds


def test_shared_peak_keeps_both_passes_activations(demo):
    shared = estimate_night(build_plan(demo, 256, 256, 8, 7.5, "euler_a", guidance_mode="shared"), [(RATES, 1.0)])
    sequential = estimate_night(build_plan(demo, 256, 256, 8, 7.5, "euler_a", guidance_mode="sequential"),
                                [(RATES, 1.0)])
    from frame.estimate import memory

    count = shared.plan.runs_of("unet")[0].count
    one = memory.component_peak(count, shared.provider)
    both = memory.component_peak(count, shared.provider, items=2)
    assert one < both < one + 2 * max(s.live_bytes for s in count.steps)
    assert shared.peak_bytes >= sequential.peak_bytes


# the demo UNet's own count: about 86 MB with both passes alive, 166 MB with the worker's taste model; the
# full-size SD 1.5 figures said about 420 MB (so 300 MB once meant "sequential" for this small model too)
@pytest.mark.parametrize("limit, expected", [(440, "shared"), (300, "shared"), (150, "sequential")])
def test_tonights_mode_is_guidance_plans_choice(demo, limit, expected, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(f"model:\n  size: 256x256\n  steps: 8\nworker:\n  memory_limit_mb: {limit}\n", encoding="utf-8")
    config = load_config(path)
    precision = guidance_plan.precision_of(load_model(str(demo.unet_source)).streamed_weights)
    unet = build_plan(demo, 256, 256, 8, 7.5, "euler_a", guidance_mode="sequential").runs_of("unet")[0].count
    chosen = guidance_plan.choose(demo.kind, 256, 256, precision, limit, True, counted_peaks_mb(unet, False))
    assert chosen.mode == expected
    result = estimate_config(config, pipe=demo, rates=RATES, texts=0)
    assert result.estimate.plan.guidance_mode == expected
    assert result.estimate.plan.guidance_reason == chosen.reason
    assert result.alternative.plan.guidance_mode == alternative_mode(expected) != expected
    reads = 1 if expected == "shared" else 2
    unet_bytes = result.estimate.plan.runs_of("unet")[0].count.weight_bytes
    assert result.estimate.bytes_per_step == reads * unet_bytes
    assert result.alternative.bytes_per_step == (3 - reads) * unet_bytes


def test_batched_still_counts_a_batch_of_two(demo):
    plan = build_plan(demo, 256, 256, 4, 7.5, "euler", guidance_mode="batched")
    unet = plan.runs_of("unet")[0]
    assert (plan.batched, plan.weight_reads, unet.evaluations, unet.items) == (True, 1, 1, 1)
    assert unet.count.input_shapes["sample"][0] == 2
    assert alternative_mode("batched") == "sequential" and alternative_mode("sequential") == "shared"


@pytest.mark.parametrize("limit, expected", [(440, "shared"), (150, "sequential")])
def test_the_nightly_step_choice_counts_the_passes_as_tonights_render_runs_them(demo, limit, expected, tmp_path,
                                                                                monkeypatch):
    import time

    from frame.estimate import configured
    from frame.statefile import read_json
    from frame.worker import step_choice as nightly

    monkeypatch.setattr(configured, "measure_throughput", lambda *args, **kwargs: RATES)
    path = tmp_path / "config.yaml"
    path.write_text(f"worker:\n  memory_limit_mb: {limit}\n", encoding="utf-8")
    config = load_config(path)
    (tmp_path / "job").mkdir()
    choice = nightly.night_steps(config, demo, (256, 256), time.time() + 3600, tmp_path / "job", tmp_path)
    saved = read_json(tmp_path / "estimate.json")
    peaks = nightly.saved_guidance_peaks(tmp_path / "job")  # the render's guidance_plan.choose gets them too
    assert saved["guidance_mode"] == expected == guidance_plan.choose(demo.kind, 256, 256, "fp32", limit, True,
                                                                      peaks).mode
    assert saved["weight_reads_per_step"] == (1 if expected == "shared" else 2)
    assert saved["step_choice"]["steps"] == choice.steps


def test_a_small_models_memory_plan_comes_from_its_own_activations(demo):
    """The demo's worker peaks at 107-155 MB; the plan once said "about 390 MB of the worker's 440 MB",
    the full-size SD 1.5's figures."""
    plan = build_plan(demo, 256, 256, 8, 7.5, "euler_a", memory_limit_mb=440)
    one, two = plan.counted_peaks_mb
    unet = plan.runs_of("unet")[0].count
    assert one < two < 160 and two - one == pytest.approx(
        (max(unet.input_bytes, max(s.kept_bytes for s in unet.steps))) / 2**20, abs=5)
    needed = round(two + guidance_plan.WORKER_EXTRA_MB)
    assert plan.guidance_reason == (f"weights read once per step: about {needed} MB of the worker's 440 MB "
                                    "(counted for this model)")
    full_size = guidance_plan.choose("sd15", 256, 256, "fp32", 440).reason  # no count: the measured figures
    assert "measured on the full-size sd15 model" in full_size


def test_the_render_runs_the_passes_as_the_estimate_counted(demo):
    from dataclasses import replace

    from frame.diffusion.render_settings import RenderSettings

    settings = RenderSettings("a", "", 4, 7.5, "euler_a", 0, 256, 256)
    model = load_model(str(demo.unet_source))
    original = demo.plan
    try:
        demo.use_plan(replace(original, memory_limit_mb=300))
        assert demo.guidance_mode_for(settings, model) == "sequential"  # the full-size figures: ~420 MB
        demo.use_plan(replace(demo.plan, counted_guidance=(256, 256, (80.0, 90.0))))
        assert demo.guidance_mode_for(settings, model) == "shared"
        demo.use_plan(replace(demo.plan, counted_guidance=(512, 512, (80.0, 90.0))))  # counted at another size
        assert demo.guidance_mode_for(settings, model) == "sequential"
    finally:
        demo.use_plan(original)
        model.close()
