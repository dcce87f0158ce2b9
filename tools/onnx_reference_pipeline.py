"""Re-create a recorded diffusers image from the exported ONNX files alone (dev-only check).

Runs the exported components with onnxruntime and diffusers' own scheduler, following
StableDiffusionPipeline / StableDiffusionXLPipeline step by step. If this matches the reference
image, the fixture folder holds everything a runtime needs (no hidden state in the torch pipeline),
and it documents the wiring frame's pipeline must reproduce.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx_export as ox
import pipeline_cases as pc
import torch


def _ids(folder: Path, sub: str, text: str) -> np.ndarray:
    from transformers import CLIPTokenizerFast

    tok = CLIPTokenizerFast.from_pretrained(str(folder / sub))
    return np.asarray(tok(text, padding="max_length", max_length=77, truncation=True).input_ids,
                      dtype=np.int32)[None]


def _encode(model: Path, text: str, sdxl: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(prompt embeddings, pooled) as the diffusers pipelines build them."""
    if not sdxl:
        return ox.run_ort(model / "text_encoder" / "model.onnx",
                          {"input_ids": _ids(model, "tokenizer", text)})["last_hidden_state"], None
    parts, pooled = [], None
    for enc, tok in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")):
        out = ox.run_ort(model / enc / "model.onnx", {"input_ids": _ids(model, tok, text)})
        layers = len([k for k in out if k.startswith("hidden_states.")])
        parts.append(out[f"hidden_states.{layers - 2}"])  # penultimate layer, diffusers' hidden_states[-2]
        pooled = out.get("text_embeds", pooled)
    return np.concatenate(parts, axis=-1), pooled


def _conditioning(model: Path, case: pc.Case, sdxl: bool, force_zeros: bool) -> dict[str, np.ndarray]:
    emb, pooled = _encode(model, case.prompt, sdxl)
    feeds = {"encoder_hidden_states": emb}
    if sdxl:
        feeds["text_embeds"] = pooled
        feeds["time_ids"] = np.array([[case.height, case.width, 0, 0, case.height, case.width]], np.float32)
    if case.guidance <= 1.0:
        return feeds
    if sdxl and force_zeros and case.negative_prompt is None:  # diffusers: only None, not ""
        neg = {"encoder_hidden_states": np.zeros_like(emb), "text_embeds": np.zeros_like(pooled)}
    else:
        neg_emb, neg_pooled = _encode(model, case.negative_prompt or "", sdxl)
        neg = {"encoder_hidden_states": neg_emb, **({"text_embeds": neg_pooled} if sdxl else {})}
    neg.setdefault("time_ids", feeds.get("time_ids"))
    return {k: np.concatenate([neg[k], v]) for k, v in feeds.items()}  # unconditional first, as diffusers


def generate(model: Path, case: pc.Case, noise: np.ndarray, step_noise: np.ndarray | None = None) -> np.ndarray:
    """The case's image (1, H, W, 3) in [0, 1] from ONNX components + diffusers' scheduler.

    ``step_noise``: the recorded in-step draws of ancestral / LCM cases, replayed in order.
    """
    index = json.loads((model / "model_index.json").read_text())
    sdxl = "text_encoder_2" in index
    scheduler = pc.make_scheduler(case, json.loads((model / "scheduler" / "scheduler_config.json").read_text()))
    scheduler.set_timesteps(case.steps)
    cond = _conditioning(model, case, sdxl, index.get("force_zeros_for_empty_prompt", False))
    latents = torch.from_numpy(noise) * scheduler.init_noise_sigma
    with pc.recorded_step_noise(scheduler, 0, [], replay=step_noise):
        latents = _denoise(model, case, scheduler, cond, latents, scheduler.timesteps)
    return _decode(model, latents)


def _decode(model: Path, latents: torch.Tensor) -> np.ndarray:
    vae = json.loads((model / "vae_decoder" / "config.json").read_text())
    z = (latents / vae["scaling_factor"]).numpy().astype(np.float32)
    image = ox.run_ort(model / "vae_decoder" / "model.onnx", {"latent_sample": z})["sample"]
    return np.clip(image / 2 + 0.5, 0, 1).transpose(0, 2, 3, 1)


def encode_ort(model: Path, pixels: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """scaling_factor * latent_dist.sample() with draw ``eps``, from vae_encoder/model.onnx and onnxruntime.

    latent_parameters: sampled here. An in-graph RandomNormalLike: replaced by an input fed ``eps``.
    """
    import tempfile

    path = model / "vae_encoder" / "model.onnx"
    scale = json.loads((model / "vae_encoder" / "config.json").read_text())["scaling_factor"]
    proto = onnx.load(str(path))
    output = proto.graph.output[0].name
    if output == "latent_parameters":
        moments = ox.run_ort(path, {"sample": pixels})[output]
        mean, logvar = np.split(moments, 2, axis=1)
        latent = mean + np.exp(0.5 * np.clip(logvar, -30, 20)) * eps
    elif any(n.op_type == "RandomNormalLike" for n in proto.graph.node):
        with tempfile.TemporaryDirectory() as tmp:
            fed, noise_name = ox.random_as_input(proto)
            onnx.save(fed, f"{tmp}/m.onnx")
            latent = ox.run_ort(Path(f"{tmp}/m.onnx"), {"sample": pixels, noise_name: eps})[output]
    else:
        latent = ox.run_ort(path, {"sample": pixels})[output]
    return (scale * latent).astype(np.float32)


def generate_img2img(model: Path, case: pc.Case, recorded: dict[str, np.ndarray]) -> np.ndarray:
    """An image-to-image case re-created from the ONNX files, the recorded draws and diffusers' scheduler."""
    from types import SimpleNamespace

    from diffusers import StableDiffusionImg2ImgPipeline

    index = json.loads((model / "model_index.json").read_text())
    sdxl = "text_encoder_2" in index
    scheduler = pc.make_scheduler(case, json.loads((model / "scheduler" / "scheduler_config.json").read_text()))
    scheduler.set_timesteps(case.steps)
    timesteps, _ = StableDiffusionImg2ImgPipeline.get_timesteps(SimpleNamespace(scheduler=scheduler), case.steps,
                                                                case.strength, "cpu")
    pixels = (recorded["init_pixels"].astype(np.float32) / 255.0 * 2 - 1).transpose(2, 0, 1)[None]
    init = encode_ort(model, pixels.astype(np.float32), recorded["posterior_noise"])
    latents = scheduler.add_noise(torch.from_numpy(init), torch.from_numpy(recorded["noise"]), timesteps[:1])
    cond = _conditioning(model, case, sdxl, index.get("force_zeros_for_empty_prompt", False))
    with pc.recorded_step_noise(scheduler, 0, [], replay=recorded.get("step_noise")):
        latents = _denoise(model, case, scheduler, cond, latents, timesteps)
    return _decode(model, latents)


def _denoise(model: Path, case: pc.Case, scheduler, cond: dict[str, np.ndarray], latents: torch.Tensor,
             timesteps):
    """The sampling loop of the diffusers pipelines, with the UNet run by onnxruntime."""
    for t in timesteps:
        x = torch.cat([latents] * 2) if case.guidance > 1.0 else latents
        x = scheduler.scale_model_input(x, t)
        feeds = {"sample": x.numpy().astype(np.float32), "timestep": np.array([float(t)], np.float32), **cond}
        eps = ox.run_ort(model / "unet" / "model.onnx", feeds)["out_sample"]
        if case.guidance > 1.0:
            eps = eps[:1] + case.guidance * (eps[1:] - eps[:1])
        latents = scheduler.step(torch.from_numpy(eps), t, latents).prev_sample
    return latents
