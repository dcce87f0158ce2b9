"""Image-to-image start for every sampler against diffusers (``tools/build_img2img_sampler_fixtures.py``).

Per case: the steps that run (diffusers' ``get_timesteps``), the noised start (the scheduler's
``add_noise`` at its begin index) and the latents after every remaining step with the fake model,
given the same clean latent, noise and (ancestral samplers) step noise.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import strength as st
from frame.diffusion.samplers import SamplerState, make_sampler
from frame.errors import UsageError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "samplers"
MANIFEST = json.loads((FIXTURES / "img2img.json").read_text())
ARRAYS = np.load(FIXTURES / "img2img.npz")


class ReplayNoise:
    def __init__(self, draws) -> None:
        self.draws = list(draws)

    def normal(self, shape):
        draw = self.draws.pop(0)
        assert draw.shape == tuple(shape)
        return draw


def fake_model(x: np.ndarray, t: float) -> np.ndarray:
    return (0.8 * np.tanh(0.7 * x + float(np.cos(t / 300.0))) + 0.1 * x).astype(np.float32)


def _id(case: dict) -> str:
    return f"{case['sampler']}-{case['config']}-{case['steps']}x{case['strength']}"


@pytest.mark.parametrize("case", MANIFEST["cases"], ids=_id)
def test_img2img_start_and_steps_match_diffusers(case):
    arrays = {k.split("/", 1)[1]: ARRAYS[k] for k in ARRAYS.files if k.startswith(case["key"] + "/")}
    sampler = make_sampler(case["sampler"], MANIFEST["configs"][case["config"]], case["steps"])
    start = st.first_step(case["steps"], case["strength"])
    assert start == case["start"] and sampler.steps - start == case["remaining"]
    np.testing.assert_allclose(sampler.timesteps[start:], case["timesteps"], rtol=0, atol=1e-4)
    latents = sampler.add_noise(arrays["clean"], arrays["noise"], start)
    np.testing.assert_allclose(latents, arrays["sample"][0], rtol=1e-6, atol=1e-6, err_msg="noised start")
    state = SamplerState(noise=ReplayNoise(arrays.get("step_noise", [])))
    for index in range(start, sampler.steps):
        output = fake_model(sampler.scale_input(latents, index), float(sampler.timesteps[index]))
        latents = sampler.step(index, output, latents, state).sample
        want = arrays["sample"][index - start + 1]
        np.testing.assert_allclose(latents, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())),
                                   err_msg=f"after step {index}")


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.01, float("nan"), "0.5", None, True])
def test_strength_outside_zero_to_one_is_refused(bad):
    with pytest.raises(UsageError, match="strength must be a number greater than 0 and at most 1"):
        st.check_strength(bad)


def test_too_few_steps_for_the_strength_names_the_fix():
    assert st.check_strength(1) == 1.0
    with pytest.raises(UsageError, match="use at least 2 steps"):
        st.first_step(1, 0.5)
    assert [st.fewest_steps(s) for s in (1.0, 0.5, 0.3, 0.29, 0.1)] == [1, 2, 4, 4, 10]
    assert st.fewest_steps(0.5, at_least=20) == 20
