"""frame's samplers against diffusers' schedulers, recorded by ``tools/build_sampler_fixtures.py``.

Each case fixes a sampler, a scheduler_config.json and a step count. The schedule (timesteps, sigmas,
initial noise scale) must agree, every single step must reproduce diffusers' next latent to 1e-5 given
the same latent, model output and (for ancestral samplers) the same noise, and a whole loop driven by
the same fake model must track diffusers' trajectory.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion.samplers import SamplerState, make_sampler

FIXTURES = Path(__file__).parents[1] / "fixtures" / "samplers"
MANIFEST = json.loads((FIXTURES / "cases.json").read_text())
ARRAYS = np.load(FIXTURES / "cases.npz")
CASES = MANIFEST["cases"]


def _id(case: dict) -> str:
    return f"{case['sampler']}-{case['config']}-{case['steps']}"


class ReplayNoise:
    """Hands out the noise diffusers drew, step by step."""

    def __init__(self, draws: list[np.ndarray]) -> None:
        self.draws = list(draws)

    def normal(self, shape):
        draw = self.draws.pop(0)
        assert draw.shape == tuple(shape)
        return draw


def fake_model(x: np.ndarray, t: float) -> np.ndarray:
    """numpy twin of the tool's fake UNet."""
    return (0.8 * np.tanh(0.7 * x + float(np.cos(t / 300.0))) + 0.1 * x).astype(np.float32)


def _arrays(case: dict) -> dict[str, np.ndarray]:
    return {name: ARRAYS[f"{case['key']}/{name}"] for name in ("sample", "model_input", "output", "noise", "initial")}


def _sampler(case: dict):
    return make_sampler(case["sampler"], MANIFEST["configs"][case["config"]], case["steps"])


def _stochastic_draws(sampler, noise: np.ndarray) -> list[np.ndarray]:
    if sampler.name == "lcm":
        return list(noise[:-1])  # LCM draws nothing on its last step
    return list(noise) if sampler.stochastic else []


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_schedule_matches(case):
    sampler = _sampler(case)
    np.testing.assert_allclose(sampler.timesteps.astype(np.float64), case["timesteps"], rtol=0, atol=1e-3)
    assert sampler.init_noise_sigma == pytest.approx(case["init_noise_sigma"], rel=1e-6)
    key = f"{case['key']}/sigmas"
    if key in ARRAYS.files and hasattr(sampler, "sigmas"):
        # torch.linspace rounds the betas differently in the last bit (SIMD-width dependent)
        np.testing.assert_allclose(sampler.sigmas, ARRAYS[key], rtol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_step_matches_given_same_inputs(case):
    sampler, data = _sampler(case), _arrays(case)
    state = SamplerState(noise=ReplayNoise(_stochastic_draws(sampler, data["noise"])))
    for i in range(sampler.steps):
        sample = data["sample"][i]
        scale = max(1.0, float(np.abs(sample).max()), float(np.abs(data["sample"][i + 1]).max()))
        np.testing.assert_allclose(sampler.scale_input(sample, i), data["model_input"][i], rtol=1e-6, atol=1e-6)
        result = sampler.step(i, data["output"][i], sample, state)
        assert result.sample.dtype == np.float32
        np.testing.assert_allclose(result.sample, data["sample"][i + 1], rtol=0, atol=1e-5 * scale,
                                   err_msg=f"step {i}")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_whole_loop_tracks_diffusers(case):
    sampler, data = _sampler(case), _arrays(case)
    state = SamplerState(noise=ReplayNoise(_stochastic_draws(sampler, data["noise"])))
    x = data["initial"] * np.float32(sampler.init_noise_sigma)
    for i in range(sampler.steps):
        output = fake_model(sampler.scale_input(x, i), float(sampler.timesteps[i]))
        x = sampler.step(i, output, x, state).sample
    scale = max(1.0, float(np.abs(data["sample"][-1]).max()))
    np.testing.assert_allclose(x, data["sample"][-1], rtol=0, atol=1e-4 * scale)


def test_fixture_covers_every_sampler():
    assert {c["sampler"] for c in CASES} == {"euler", "euler_a", "ddim", "dpm++2m", "dpm++2m_karras", "lcm"}
