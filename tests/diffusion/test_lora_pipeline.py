"""LoRAs streamed by frame's engine against diffusers' ``load_lora_weights`` on the tiny pipelines.

Fixtures from ``tools/build_lora_fixtures.py``: random-weight LoRAs made with peft (UNet attention,
feed-forward, proj_in/out, resnet convs (LoCon), time_emb_proj (a Gemm), the text encoders), saved in
kohya's keys by diffusers' ``convert_state_dict_to_kohya`` (one in diffusers' PEFT layout), and the
images diffusers renders with them (``set_adapters`` with the case's scales). Each LoRA moves the
image to 12-19 dB from the render without it (``psnr_db_vs_no_lora``), so 40 dB means it was applied.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import RenderPlan, load_pipeline
from frame.diffusion.loras import LoraRequest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pipelines"


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def _cases() -> list:
    out = []
    for kind in ("sd15", "sdxl"):
        path = FIXTURES / kind / "lora_cases.json"
        manifest = json.loads(path.read_text()) if path.exists() else {"cases": []}
        out += [pytest.param(kind, case, id=f"{kind}-{case['name']}") for case in manifest["cases"]]
    return out


def _render(kind: str, case: dict, prompt_tags: bool, weights: str = "prefetch") -> np.ndarray:
    base = next(c for c in json.loads((FIXTURES / kind / "cases.json").read_text())["cases"]
                if c["name"] == case["case"])
    prompt = base["prompt"]
    requests = () if prompt_tags else tuple(LoraRequest(u["name"], u["scale"]) for u in case["loras"])
    if prompt_tags:
        prompt += " " + " ".join(f"<lora:{u['name']}:{u['scale']}>" for u in case["loras"])
    plan = RenderPlan(loras=requests, lora_folders=(str(FIXTURES / kind / "loras"),))
    pipe = load_pipeline(FIXTURES / kind / "model", weights=weights, plan=plan)
    settings = pipe.settings(prompt, base["negative_prompt"], base["steps"], base["guidance"], base["sampler"], 0,
                             base["width"], base["height"])
    latents = pipe.denoise_settings(settings, np.load(FIXTURES / kind / "noise" / base["noise"]))
    return np.asarray(pipe.decode(latents), dtype=np.float32)


@pytest.mark.parametrize(("kind", "case"), _cases())
def test_lora_image_matches_diffusers(kind, case):
    reference = np.load(FIXTURES / kind / case["reference"])["image"][0] * 255.0
    ours = _render(kind, case, prompt_tags=True)
    assert psnr(ours, reference) >= 40.0, f"{psnr(ours, reference):.1f} dB"


def test_model_loras_setting_matches_the_tags():
    """``model.loras`` (the plan's ``loras``) paints what the same LoRAs as prompt tags paint, and the
    picture's parameters carry them in A1111's form."""
    case = json.loads((FIXTURES / "sd15" / "lora_cases.json").read_text())["cases"][0]
    reference = np.load(FIXTURES / "sd15" / case["reference"])["image"][0] * 255.0
    assert psnr(_render("sd15", case, prompt_tags=False), reference) >= 40.0
    pipe = load_pipeline(FIXTURES / "sd15" / "model", plan=RenderPlan(loras=(LoraRequest("ink", 1.0),)))
    settings = pipe.settings("a boat <lora:wood:0.5>", "", 2, 5.0, "euler", 1, 64, 64)
    text = pipe.parameters(settings).to_text()
    assert text.startswith("a boat <lora:wood:0.5> <lora:ink:1>")
