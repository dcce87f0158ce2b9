"""frame's image-to-image against diffusers' StableDiffusionImg2ImgPipeline / StableDiffusionXLImg2ImgPipeline.

References: ``tools/build_pipeline_fixtures.py`` (``tests/fixtures/pipelines/<kind>/img2img.json``). The
sd15 folder's vae_encoder samples inside the graph (RandomNormalLike, optimum < 1.23), the sdxl one
returns the posterior's parameters (optimum >= 1.23); the two draws diffusers made (VAE posterior,
added noise) and the ancestral samplers' step noise are replayed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from frame.diffusion import img2img, load_pipeline
from frame.diffusion.samplers import make_sampler
from frame.diffusion.vae import encoder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pipelines"
KINDS = ("sd15", "sdxl")


def _manifest(kind: str) -> dict:
    return json.loads((FIXTURES / kind / "img2img.json").read_text())


CASES = [pytest.param(kind, case, id=f"{kind}-{case['name']}") for kind in KINDS for case in _manifest(kind)["cases"]]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


class ReplayNoise:
    def __init__(self, draws) -> None:
        self.draws = list(draws)

    def normal(self, shape):
        draw = self.draws.pop(0)
        assert draw.shape == tuple(shape)
        return draw.astype(np.float32)


@pytest.fixture(scope="module")
def pipelines():
    return {kind: load_pipeline(FIXTURES / kind / "model") for kind in KINDS}


def _pipeline(pipelines, kind: str, case: dict):
    pipe = pipelines[kind]
    if not case["scheduler_overrides"]:
        return pipe
    copy = load_pipeline(FIXTURES / kind / "model")
    copy.info = dataclasses.replace(pipe.info, scheduler_config={**pipe.info.scheduler_config,
                                                                 **case["scheduler_overrides"]})
    return copy


def _picture(kind: str, case: dict) -> Image.Image:
    return Image.open(FIXTURES / kind / "init" / case["init_image"])


@pytest.mark.parametrize(("kind", "case"), CASES)
def test_fit_is_diffusers_crop_resize(kind, case):
    ref = np.load(FIXTURES / kind / case["reference"])
    fitted = img2img.fit(_picture(kind, case), case["width"], case["height"])
    np.testing.assert_array_equal(np.asarray(fitted), ref["init_pixels"])


@pytest.mark.parametrize(("kind", "case"), CASES)
def test_start_latent_is_diffusers_prepare_latents(pipelines, kind, case):
    """VAE encoder (posterior sample with diffusers' draw) x scaling factor, then add_noise, to 1e-4 of the
    largest value (the posterior draw alone moves it by ~1e-2: a mean instead of a sample would fail)."""
    pipe = _pipeline(pipelines, kind, case)
    ref = np.load(FIXTURES / kind / case["reference"])
    init = img2img.prepare(_picture(kind, case), case["width"], case["height"])
    latent = encoder.encode(pipe.load, pipe.vae_encoder_source(), init.pixels, ref["posterior_noise"],
                               pipe.info.scaling_factor)
    sampler = make_sampler(case["sampler"], pipe.info.scheduler_config, case["steps"])
    start = sampler.add_noise(latent, ref["noise"], sampler.steps - len(ref["step_latents"]))
    scale = float(np.abs(ref["init_latents"]).max())
    np.testing.assert_allclose(start, ref["init_latents"], rtol=0, atol=1e-4 * scale)


@pytest.mark.parametrize(("kind", "case"), CASES)
def test_image_matches_diffusers(pipelines, kind, case):
    pipe = _pipeline(pipelines, kind, case)
    ref = np.load(FIXTURES / kind / case["reference"])
    settings = pipe.settings(case["prompt"], case["negative_prompt"], case["steps"], case["guidance"],
                             case["sampler"], 0, case["width"], case["height"], case["strength"])
    init = img2img.prepare(_picture(kind, case), case["width"], case["height"], ref["posterior_noise"])
    replay = ReplayNoise(ref["step_noise"]) if "step_noise" in ref.files else None
    steps = []

    def record(progress):
        if progress.step_done:
            steps.append((progress.step, progress.steps, progress.latents))

    latents = pipe.denoise_settings(settings, ref["noise"], record, step_noise=replay, init_image=init)
    run = len(ref["step_latents"])
    assert [(s[0], s[1]) for s in steps] == [(i + 1, run) for i in range(run)]  # counts the steps that run
    scale = float(np.abs(ref["step_latents"]).max())
    for index, ((_, _, ours), theirs) in enumerate(zip(steps, ref["step_latents"])):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-3 * scale, err_msg=f"latents after step {index}")
    image = np.asarray(pipe.decode(latents))
    value = psnr(image, ref["image"][0])
    print(f"{kind}/img2img_{case['name']}: PSNR {value:.1f} dB vs diffusers")
    assert value >= 40.0
