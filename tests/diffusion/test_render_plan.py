"""The pipeline takes its ``RenderPlan`` whole: at construction (``frame.diffusion.configured`` makes
it from the configuration) or replaced by ``use_plan``; no field of it is assigned on a pipeline."""

from __future__ import annotations

import dataclasses

import pytest

from frame.config import load_config
from frame.diffusion import RenderPlan, load_pipeline
from frame.diffusion.configured import pipeline_setup
from frame.diffusion.loras import LoraRequest
from frame.diffusion.pipeline import PLAN_FIELDS
from frame.errors import UsageError
from frame.models import demo_model_path


@pytest.fixture(scope="module")
def pipe():
    return load_pipeline(demo_model_path(), plan=RenderPlan(vae_tile=16, memory_limit_mb=300))


def test_the_plan_names_what_was_assigned_from_outside():
    assert PLAN_FIELDS == {"vae_tile", "vae_tile_overlap", "vae_peak_mb", "guidance_mode", "counted_guidance",
                           "memory_limit_mb", "readahead", "loras", "lora_folders"}


@pytest.mark.parametrize("name", sorted(PLAN_FIELDS))
def test_a_plan_field_cannot_be_assigned_on_a_pipeline(pipe, name):
    before = pipe.plan
    with pytest.raises(AttributeError, match=f"Pipeline.{name} is part of its RenderPlan"):
        setattr(pipe, name, None)
    with pytest.raises(AttributeError):
        pipe.plan = RenderPlan()  # the plan itself has no setter either: use_plan
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(pipe.plan, name, None)
    assert pipe.plan is before


def test_the_plan_is_frozen_all_the_way_down():
    readahead, loras = {"unet": 1 << 20}, [LoraRequest("ink", 1.0)]
    plan = RenderPlan(readahead=readahead, loras=loras)
    readahead["unet"], loras[0] = 0, LoraRequest("wood", 0.5)  # the caller's own objects change
    assert plan.readahead == {"unet": 1 << 20} and plan.loras == (LoraRequest("ink", 1.0),)
    with pytest.raises(TypeError):
        plan.readahead["vae_decoder"] = 1  # type: ignore[index]


def test_use_plan_replaces_the_plan_whole(pipe):
    original = pipe.plan
    try:
        pipe.use_plan(dataclasses.replace(original, readahead={"unet": 32 << 20}, counted_guidance=(64, 64, (1, 2))))
        assert pipe.plan.readahead == {"unet": 32 << 20} and pipe.plan.guidance_peaks(64, 64) == (1, 2)
        assert pipe.plan.guidance_peaks(128, 64) is None  # counted at another size
        assert pipe.plan.vae_tile == 16 and pipe.plan.lora_folders == original.lora_folders
        with pytest.raises(UsageError, match="takes a RenderPlan"):
            pipe.use_plan({"vae_tile": 8})  # type: ignore[arg-type]
    finally:
        pipe.use_plan(original)


def test_an_unknown_guidance_mode_is_refused_by_the_plan():
    with pytest.raises(UsageError, match="unknown guidance mode 'double'"):
        RenderPlan(guidance_mode="double")


def test_configured_makes_the_plan_from_the_configuration(tmp_path):
    config_file = tmp_path / "config.yaml"
    config_file.write_text("model:\n  vae_tile: 24\n  vae_tile_overlap: 4\nworker:\n  memory_limit_mb: 350\n")
    setup = pipeline_setup(load_config(config_file))
    plan = setup.plan()
    assert (plan.vae_tile, plan.vae_tile_overlap, plan.memory_limit_mb) == (24, 4, 350)
    assert plan.loras == setup.loras and plan.lora_folders == setup.lora_folders
    seen = []
    loaded = setup.load(vae_peak=lambda p: seen.append(p) or (lambda tile: 100.0))
    assert seen == [loaded] and loaded.plan.vae_peak_mb((32, 32)) == 100.0
    assert dataclasses.replace(loaded.plan, vae_peak_mb=None) == plan
