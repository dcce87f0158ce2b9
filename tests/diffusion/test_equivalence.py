"""frame's pipeline against diffusers on tiny SD 1.5- and SDXL-style exports.

References come from ``tools/build_pipeline_fixtures.py`` (``tests/fixtures/pipelines/<kind>/``): diffusers
(torch) renders of fixed prompts from fixed initial noise with every sampler, plus their token ids,
text embeddings and per-step latents. Ancestral samplers (euler_a, multi-step lcm) replay the noise
diffusers drew. frame runs the same ONNX export through its own engine.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import conditioning, load_pipeline
from frame.diffusion.tokenizer import ClipTokenizer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pipelines"


def _cases() -> list:
    out = []
    for kind in ("sd15", "sdxl"):
        manifest = json.loads((FIXTURES / kind / "cases.json").read_text())
        out += [pytest.param(kind, case, id=f"{kind}-{case['name']}") for case in manifest["cases"]]
    return out


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


class ReplayNoise:
    def __init__(self, draws: np.ndarray) -> None:
        self.draws = list(draws)

    def normal(self, shape):
        draw = self.draws.pop(0)
        assert draw.shape == tuple(shape)
        return draw.astype(np.float32)


@pytest.fixture(scope="module")
def pipelines():
    return {kind: load_pipeline(FIXTURES / kind / "model") for kind in ("sd15", "sdxl")}


def _pipeline(pipelines, kind: str, case: dict):
    """The fixture pipeline, with the case's own scheduler_config.json (the same weights shipped with
    another scheduler file) and scheduler overrides where it has them."""
    pipe = pipelines[kind]
    if not case["scheduler_overrides"] and not case.get("scheduler_config"):
        return pipe
    copy = load_pipeline(FIXTURES / kind / "model")
    scheduler_file = case.get("scheduler_config") or pipe.info.scheduler_config
    copy.info = dataclasses.replace(pipe.info, scheduler_config={**scheduler_file, **case["scheduler_overrides"]})
    return copy


@pytest.mark.parametrize(("kind", "case"), _cases())
def test_image_matches_diffusers(pipelines, kind, case):
    pipe = _pipeline(pipelines, kind, case)
    ref = np.load(FIXTURES / kind / case["reference"])
    settings = pipe.settings(case["prompt"], case["negative_prompt"], case["steps"], case["guidance"],
                             case["sampler"], 0, case["width"], case["height"])
    init_noise = np.load(FIXTURES / kind / "noise" / case["noise"])
    replay = ReplayNoise(ref["step_noise"]) if "step_noise" in ref.files else None
    steps = []

    def record(progress):
        if progress.step_done:
            steps.append(progress.latents)

    latents = pipe.denoise_settings(settings, init_noise, record, step_noise=replay)
    scale = float(np.abs(ref["step_latents"]).max())
    for index, (ours, theirs) in enumerate(zip(steps, ref["step_latents"])):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-3 * scale, err_msg=f"latents after step {index}")
    image = np.asarray(pipe.decode(latents))
    expected = (ref["image"][0] * 255).round().astype(np.uint8)
    assert image.shape == expected.shape
    value = psnr(image, expected)
    print(f"{kind}/{case['name']}: PSNR {value:.1f} dB vs diffusers")
    assert value >= 40.0


@pytest.mark.parametrize(("kind", "case"), _cases())
def test_tokens_and_text_embeddings_match(pipelines, kind, case):
    pipe = _pipeline(pipelines, kind, case)
    ref = np.load(FIXTURES / kind / case["reference"])
    for index, encoder in enumerate(pipe.encoders):
        suffix = "" if index == 0 else f"_{index + 1}"
        tokenizer = ClipTokenizer.from_folder(encoder.tokenizer_folder)
        assert tokenizer(case["prompt"]) == ref[f"input_ids{suffix}"][0].tolist()
    guided = case["guidance"] > 1
    cond, uncond = conditioning.encode_prompts(pipe.encoders, pipe.load, pipe.info, case["prompt"],
                                               case["negative_prompt"], guided, print)
    np.testing.assert_allclose(cond.hidden, ref["prompt_embeds"], atol=1e-4, rtol=1e-4)
    if kind == "sdxl":
        np.testing.assert_allclose(cond.pooled, ref["pooled_prompt_embeds"], atol=1e-4, rtol=1e-4)
    if guided:
        np.testing.assert_allclose(uncond.hidden, ref["negative_prompt_embeds"], atol=1e-4, rtol=1e-4)
        if kind == "sdxl":
            np.testing.assert_allclose(uncond.pooled, ref["negative_pooled_prompt_embeds"], atol=1e-4, rtol=1e-4)
