"""``frame config check`` applies every rule the night applies to the configured model (issue 13 item 17).

It once accepted ``model.size: 504x296``, which the render refused ("multiples of 16"): the schema only
knew "multiples of 8". Now the check resolves the settings as the night does and runs them through the
pipeline's own rules (``frame.diffusion.rules``), for the model kind ``model.source`` names.
"""

from __future__ import annotations

import shutil

import pytest

from frame.cli.program import main
from frame.config import load_config
from frame.diffusion import load_pipeline
from frame.errors import ConfigError, FrameError
from frame.models import demo_model_path
from frame.worker.checks import check_config


def _check(tmp_path, text: str) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        check_config(path, environ={})
    except ConfigError as exc:
        return exc.problems
    return []


def _turbo_copy(tmp_path):
    """The demo model under a Turbo name: frame treats it as SD Turbo (1-4 steps, no guidance). Without
    the demo's own 8-step default (model_index.json's _frame_default_steps), as a real Turbo export."""
    import json

    folder = shutil.copytree(demo_model_path(), tmp_path / "sd-turbo-demo")
    index = json.loads((folder / "model_index.json").read_text())
    index.pop("_frame_default_steps")
    (folder / "model_index.json").write_text(json.dumps(index))
    return folder


def _static_copy(tmp_path, latent=(20, 32)):
    """The demo model exported with fixed spatial axes: it renders 256x160 only."""
    import onnx

    folder = shutil.copytree(demo_model_path(), tmp_path / "static")
    path = folder / "unet" / "model.onnx"
    model = onnx.load(str(path))
    sample = next(i for i in model.graph.input if i.name == "sample")
    for axis, size in zip((2, 3), latent):
        sample.type.tensor_type.shape.dim[axis].ClearField("dim_param")
        sample.type.tensor_type.shape.dim[axis].dim_value = size
    onnx.save(model, str(path))
    return folder


def test_size_the_render_refuses_is_refused_by_the_check(tmp_path):
    problems = _check(tmp_path, "model:\n  size: 504x296\n")
    assert problems == ["model.size: size 504x296 is not allowed: width and height must be positive multiples "
                        "of 16 pixels for this SD 1.5 model (e.g. 512x288) (line 2)"]
    assert _check(tmp_path, "model:\n  size: 512x288\n") == []


def test_steps_beyond_the_samplers_limits(tmp_path):
    assert _check(tmp_path, "model:\n  sampler: lcm\n  steps: 60\n") == [
        "model.steps: lcm: steps must be between 1 and original_inference_steps=50, got 60 (line 3)"]
    problems = _check(tmp_path, "model:\n  steps: 1001\n")
    assert problems == ["model.steps: steps must be an integer from 1 to 1000, got 1001 (line 2)"]
    assert _check(tmp_path, "model:\n  sampler: lcm\n  steps: 50\n") == []


def test_vae_tile_overlap_must_be_smaller_than_the_tile(tmp_path):
    assert _check(tmp_path, "model:\n  vae_tile: 8\n  vae_tile_overlap: 8\n") == [
        "model.vae_tile_overlap: the VAE tile overlap must be at least 0 and smaller than the tile "
        "(8 latent pixels), got 8 (line 3)"]


def test_turbo_settings_are_warnings_with_exit_0(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(f"model:\n  source: {_turbo_copy(tmp_path)}\n  steps: 8\n  guidance: 3\n", encoding="utf-8")
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "model.steps: warning: SD 1.5 Turbo models are distilled for 1-4 steps; 8 steps" in out
    assert "model.guidance: warning: SD 1.5 Turbo models are distilled without guidance; guidance 3" in out
    path.write_text(f"model:\n  source: {tmp_path / 'sd-turbo-demo'}\n", encoding="utf-8")
    assert main(["config", "check", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out  # its defaults: 1 step, guidance 0


def test_an_export_with_fixed_axes_allows_its_one_size(tmp_path):
    folder = _static_copy(tmp_path)
    assert _check(tmp_path, f"model:\n  source: {folder}\n  size: 512x320\n") == [
        "model.size: size 512x320 is not allowed: this SD 1.5 export has fixed axes and only renders 256x160 "
        "(line 3)"]
    assert _check(tmp_path, f"model:\n  source: {folder}\n  size: auto\n") == []
    assert _check(tmp_path, f"model:\n  source: {folder}\n  size: 256x160\n") == []


def test_a_schedule_the_sampler_cannot_use_is_a_model_source_problem(tmp_path):
    folder = shutil.copytree(demo_model_path(), tmp_path / "odd")
    config = folder / "scheduler" / "scheduler_config.json"
    config.write_text(config.read_text().replace('"epsilon"', '"flow"'))
    problems = _check(tmp_path, f"model:\n  source: {folder}\n")
    assert len(problems) == 1 and problems[0].startswith("model.source: scheduler_config.json: prediction_type "
                                                         "'flow' is not supported")


SETTINGS = [  # (model section, panel size) pairs; the check and the night must agree on each
    ("size: 504x296", "800x480"), ("size: 512x288", "800x480"), ("size: 50x50", "800x480"),
    ("size: auto", "600x448"), ("steps: 0", "800x480"), ("steps: 1000", "800x480"), ("steps: 1001", "800x480"),
    ("sampler: lcm\n  steps: 51", "800x480"), ("sampler: ddim\n  steps: 3", "800x480"), ("guidance: 0", "800x480"),
]


@pytest.mark.parametrize("model, panel", SETTINGS)
def test_check_and_night_agree(tmp_path, model, panel):
    """The night's generate step resolves and checks the settings; the check must say the same."""
    from frame.diffusion.sizes import night_size as _size

    path = tmp_path / "config.yaml"
    path.write_text(f"model:\n  {model}\ndisplay:\n  size: {panel}\n", encoding="utf-8")
    try:
        config = load_config(path, environ={})
    except ConfigError as exc:  # the schema already refuses it (steps: 0): so does the night's start
        assert exc.problems
        return
    pipe = load_pipeline(demo_model_path())
    try:
        pipe.settings("x", "", config.model.steps, config.model.guidance, config.model.sampler, 0, *_size(config, pipe))
        night_refuses = False
    except FrameError:
        night_refuses = True
    assert bool(_check(tmp_path, path.read_text())) == night_refuses
