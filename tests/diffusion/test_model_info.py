"""Model kind detection, sizes and the PNG parameter text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import is_turbo, read_model_info
from frame.diffusion.pngmeta import GenerationParameters
from frame.diffusion.sizes import auto_size, check_size, parse_size
from frame.errors import FrameError, UsageError
from frame.models import demo_model_path

SCHEDULER = {"_class_name": "EulerDiscreteScheduler", "beta_schedule": "scaled_linear", "beta_start": 0.00085,
             "beta_end": 0.012, "timestep_spacing": "leading", "steps_offset": 1}


def make_export(root: Path, components: dict, scheduler: dict | None = None, name: str = "",
                unet: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model_index.json").write_text(json.dumps({"_name_or_path": name, **components}))
    (root / "scheduler").mkdir(exist_ok=True)
    (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(scheduler or SCHEDULER))
    if unet is not None:
        (root / "unet").mkdir(exist_ok=True)
        (root / "unet" / "config.json").write_text(json.dumps(unet))
    return root


SD15 = {"text_encoder": ["transformers", "CLIPTextModel"], "unet": ["diffusers", "UNet2DConditionModel"]}
SDXL = {**SD15, "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"]}


def test_sd15_demo_model_info():
    info = read_model_info(ModelFiles(demo_model_path()))
    assert (info.kind, info.turbo, info.label) == ("sd15", False, "SD 1.5")
    assert info.scaling_factor == pytest.approx(0.18215)
    assert info.vae_factor == 8 and info.native_size == (512, 512)
    assert (info.default_steps, info.default_guidance) == (8, 7.5)  # the demo's own step count


def test_sdxl_and_turbo_detection(tmp_path):
    sdxl = read_model_info(ModelFiles(make_export(tmp_path / "xl", SDXL, unet={"sample_size": 128,
                                                                              "block_out_channels": [1, 2, 3]})))
    assert (sdxl.kind, sdxl.turbo, sdxl.scaling_factor, sdxl.native_size) == ("sdxl", False, 0.13025, (1024, 1024))
    assert sdxl.default_guidance == 5.0 and sdxl.force_zeros_for_empty_prompt
    turbo = read_model_info(ModelFiles(make_export(tmp_path / "t", SDXL, name="stabilityai/sdxl-turbo")))
    assert turbo.turbo and turbo.label == "SDXL Turbo"
    assert (turbo.default_steps, turbo.default_guidance) == (1, 0.0)


def test_turbo_heuristics():
    assert is_turbo("sd-turbo-onnx", {})
    assert is_turbo("x", {"timestep_spacing": "trailing"})
    assert not is_turbo("x", {"timestep_spacing": "trailing", "rescale_betas_zero_snr": True})
    assert not is_turbo("stable-diffusion-v1-5", {"timestep_spacing": "leading"})


def test_refiner_and_empty_index_are_rejected(tmp_path):
    refiner = make_export(tmp_path / "r", {"text_encoder_2": ["transformers", "CLIPTextModelWithProjection"]})
    with pytest.raises(FrameError, match="refiner"):
        read_model_info(ModelFiles(refiner))
    with pytest.raises(FrameError, match="no text_encoder"):
        read_model_info(ModelFiles(make_export(tmp_path / "e", {})))


def test_sizes():
    info = read_model_info(ModelFiles(demo_model_path()))
    assert parse_size("512x320") == (512, 320) and parse_size(" auto ") is None
    with pytest.raises(UsageError, match="WIDTHxHEIGHT"):
        parse_size("512by320")
    assert check_size(512, 320, info) == (40, 64)
    with pytest.raises(UsageError, match="multiples of 16 pixels.*e.g. 512x320"):
        check_size(510, 322, info)
    with pytest.raises(UsageError, match="fixed axes and only renders 512x512"):
        check_size(256, 256, info, static_latent=(64, 64))
    width, height = auto_size(info, 800 / 480)
    assert width % 16 == 0 and height % 16 == 0
    assert width / height == pytest.approx(800 / 480, rel=0.03)
    assert 0.8 < width * height / 512**2 < 1.25
    assert auto_size(info, 1.0) == (512, 512)
    assert auto_size(info, 2.0, static_latent=(64, 64)) == (512, 512)


def test_parameters_text_quotes_separators():
    text = GenerationParameters("a cat", "", 4, "euler_a", 7.0, 1, 64, 64, "my, model").to_text()
    assert text == ("a cat\nSteps: 4, Sampler: Euler a, CFG scale: 7, Seed: 1, Size: 64x64, "
                    f'Model: "my, model", Version: frame {__import__("frame").__version__}')


def test_the_demo_models_8_steps_travel_with_it(tmp_path):
    """Issue 29 item 23: the 8-step default was keyed on the bundled folder's path, so a converted copy
    of the demo (and the demo served over HTTP) painted 20 steps. The model carries it in its
    model_index.json now."""
    import shutil

    from frame.cli.program import main
    from frame.models import DEFAULT_STEPS_KEY, DEMO_DEFAULT_STEPS
    from tests.engine.http_server import RangeServer

    index = json.loads((demo_model_path() / "model_index.json").read_text())
    assert index[DEFAULT_STEPS_KEY] == DEMO_DEFAULT_STEPS == 8
    assert read_model_info(ModelFiles(demo_model_path())).default_steps == 8
    copy = tmp_path / "demo-copy"
    shutil.copytree(demo_model_path(), copy)
    assert read_model_info(ModelFiles(copy)).default_steps == 8
    assert main(["model", "convert", str(demo_model_path()), str(tmp_path / "demo-fp16"), "--weights", "fp16"]) == 0
    assert read_model_info(ModelFiles(tmp_path / "demo-fp16")).default_steps == 8
    served = RangeServer(str(demo_model_path())).start()
    try:
        assert read_model_info(ModelFiles(served.url(""), cache_dir=tmp_path / "cache")).default_steps == 8
    finally:
        served.stop()
    other = make_export(tmp_path / "sd15", {"text_encoder": ["transformers", "CLIPTextModel"]})
    assert read_model_info(ModelFiles(other)).default_steps == 20  # a real model keeps its kind's default
    bad = make_export(tmp_path / "bad", {"text_encoder": ["transformers", "CLIPTextModel"]})
    (bad / "model_index.json").write_text(json.dumps({"text_encoder": ["a", "b"], DEFAULT_STEPS_KEY: "eight"}))
    with pytest.raises(FrameError, match="_frame_default_steps must be a positive whole number, got 'eight'"):
        read_model_info(ModelFiles(bad))
