"""Issue 29 item 26 (issue 13 item 26 again): DDIM on an SD 1.5 pipeline whose scheduler is an
EulerDiscreteScheduler with "linspace" spacing and no ``clip_sample`` key landed 15 dB from diffusers'
``StableDiffusionPipeline`` after ``DDIMScheduler.from_config(pipe.scheduler.config)``.

The difference is diffusers' own, and this test shows it live (it needs the dev-only diffusers and
torch, and is skipped without them). A scheduler built in memory records the keys left at their
defaults in ``config._use_default_values`` ("timestep_spacing" among them), and ``from_config`` of
another class drops those keys, so the DDIM it makes takes DDIM's own default, "leading": timesteps
751, 501, 251, 1 instead of 999, 666, 333, 0. ``save_config`` writes "linspace" out and no
``_use_default_values``, so the same pipeline loaded from its folder (and frame, which only ever sees
the folder) switches to a "linspace" DDIM. Given the same configuration, frame's DDIM equals diffusers':
the same timesteps, ``alphas_cumprod``, final alpha (1, ``set_alpha_to_one``), clipping (DDIM's default
``clip_sample: true``) and every step on random inputs to 1e-6. The pipeline-level check of the
folder's case is tests/tools/test_pipeline_fixture_files.py::test_ddim_from_an_euler_file_follows_the_file
(and the ≥ 40 dB reference in tests/diffusion/test_equivalence.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from frame.diffusion.samplers import make_sampler
from frame.diffusion.samplers.base import SamplerState

diffusers = pytest.importorskip("diffusers", reason="dev-only: pip install diffusers==0.42.1 torch==2.13.0")
torch = pytest.importorskip("torch")

EULER_SD15 = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "steps_offset": 1}
STEPS = 4


def _diffusers_step(scheduler, t: int, output: np.ndarray, sample: np.ndarray) -> np.ndarray:
    return scheduler.step(torch.from_numpy(output), t, torch.from_numpy(sample), eta=0.0).prev_sample.numpy()


def _agrees(frame_config: dict, reference) -> None:
    """frame's DDIM built from ``frame_config`` is diffusers' ``reference`` DDIM, step by step."""
    ours = make_sampler("ddim", frame_config, STEPS)
    reference.set_timesteps(STEPS)
    assert ours.timesteps.tolist() == reference.timesteps.tolist()
    np.testing.assert_allclose(ours.alphas_cumprod, reference.alphas_cumprod.numpy(), rtol=1e-6)
    assert float(ours.final_alpha_cumprod) == float(reference.final_alpha_cumprod)
    assert ours.config.clip_sample == reference.config.clip_sample
    rng = np.random.default_rng(26)
    for index, t in enumerate(reference.timesteps.tolist()):
        sample = rng.standard_normal((1, 4, 8, 12)).astype(np.float32) * 3
        output = rng.standard_normal((1, 4, 8, 12)).astype(np.float32)
        mine = ours.step(index, output, sample, SamplerState(noise=None)).sample
        np.testing.assert_allclose(mine, _diffusers_step(reference, t, output, sample), atol=1e-6)


def test_diffusers_in_memory_switch_drops_linspace_and_frame_agrees_with_each_config(tmp_path):
    euler = diffusers.EulerDiscreteScheduler(**EULER_SD15)
    assert euler.config.timestep_spacing == "linspace"
    assert "timestep_spacing" in euler.config["_use_default_values"]  # the cause
    in_memory = diffusers.DDIMScheduler.from_config(euler.config)
    in_memory.set_timesteps(STEPS)
    assert in_memory.config.timestep_spacing == "leading" and in_memory.timesteps.tolist() == [751, 501, 251, 1]

    euler.save_config(tmp_path)
    saved = json.loads((tmp_path / "scheduler_config.json").read_text())  # what frame reads from the folder
    assert saved["timestep_spacing"] == "linspace" and "_use_default_values" not in saved
    assert "clip_sample" not in saved and "set_alpha_to_one" not in saved
    from_folder = diffusers.DDIMScheduler.from_config(diffusers.EulerDiscreteScheduler.from_pretrained(tmp_path).config)
    from_folder.set_timesteps(STEPS)
    assert from_folder.timesteps.tolist() == [999, 666, 333, 0]
    assert from_folder.config.clip_sample is True and from_folder.config.set_alpha_to_one is True

    _agrees(saved, from_folder)  # the folder: what frame paints from, as diffusers itself reads it
    _agrees({**saved, "timestep_spacing": "leading"}, diffusers.DDIMScheduler.from_config(euler.config))
