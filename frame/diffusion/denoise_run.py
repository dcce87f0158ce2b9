"""The denoising run of one render: from the starting latent to the final one, the UNet every step.

``pipeline.Pipeline`` ties the stages of a render together; this is the stage with the most rules of
its own, which is why it is its own module: where the loop starts (fresh noise, a picture noised to
its first step for image-to-image, or the last checkpoint of a crashed render), what each step saves
(``resume``) and reports (``progress.StepReports``), and how tonight's guidance passes run
(``guidance_plan``). It asks its pipeline (``DenoisingPipeline``) only for what the model offers:
its files, plan, loaders and encoders.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from frame.diffusion import (
    conditioning,
    denoise,
    guidance_plan,
    img2img,
    loras,
    resume,
    textual_inversion,
)
from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import ModelInfo
from frame.diffusion.noise import sources as noise_sources
from frame.diffusion.onnxstream_layout import OnnxStreamFiles
from frame.diffusion.progress import FetchMeter, Progress, ProgressCallback, StepReports
from frame.diffusion.render_plan import RenderPlan
from frame.diffusion.render_settings import RenderSettings
from frame.diffusion.samplers import Sampler, SamplerState, make_sampler
from frame.diffusion.samplers.base import Noise
from frame.diffusion.vae import encoder as vae_encode
from frame.diffusion.vae import tiles as vae_tiles
from frame.engine.memory import release_model
from frame.engine.runnable import Runnable
from frame.errors import UsageError

log = logging.getLogger(__name__)

LATENT_CHANNELS = 4
AESTHETIC_SCORES = (2.5, 6.0)  # diffusers' SDXL img2img defaults (negative, positive), refiner-type exports only


class DenoisingPipeline(Protocol):
    """What a denoising run reads from its pipeline (``pipeline.Pipeline`` is one)."""

    files: ModelFiles | OnnxStreamFiles
    info: ModelInfo
    load: Callable[..., Runnable]
    unet_source: str
    encoders: Sequence[conditioning.Encoder]
    embeddings: textual_inversion.Embeddings

    @property
    def plan(self) -> RenderPlan: ...

    @property
    def kind(self) -> str: ...

    def lora_loader(self, prompt: str) -> Callable[..., Runnable]: ...

    def img2img_encoder(self) -> tuple[str, float]: ...


def initial_noise(settings: RenderSettings, init_noise: np.ndarray | None, noise: Noise,
                  vae_factor: int) -> np.ndarray:
    """The standard-normal starting noise: ``init_noise`` checked against the render size, else drawn."""
    shape = (1, LATENT_CHANNELS, settings.height // vae_factor, settings.width // vae_factor)
    if init_noise is None:
        return noise.normal(shape)
    init_noise = np.asarray(init_noise)
    if init_noise.shape != shape:
        raise UsageError(f"init_noise has shape {init_noise.shape}; {settings.width}x{settings.height} "
                         f"needs {shape}")
    return init_noise.astype(np.float32)


def denoise_settings(pipe: DenoisingPipeline, settings: RenderSettings, init_noise: np.ndarray | None = None,
                     callback: ProgressCallback | None = None,
                     resume_dir: str | os.PathLike | None = None, step_noise: Noise | None = None,
                     init_image: img2img.InitImage | None = None) -> np.ndarray:
    """Run the sampling loop for resolved settings; returns the final latents.

    ``step_noise`` replaces the seeded noise that ancestral samplers draw after the initial latent
    (tests replay the noise diffusers drew); it is not checkpointed. ``init_image``
    (``img2img.prepare`` at the settings' size, with ``settings.strength``) starts from a picture;
    progress then counts the steps that run (12 of 12 for 20 steps at strength 0.6).
    """
    sampler = make_sampler(settings.sampler, pipe.info.scheduler_config, settings.steps)
    first = img2img.first_step(settings, init_image)
    noise = noise_sources.make_noise(settings.noise, settings.seed)
    start_noise = initial_noise(settings, init_noise, noise, pipe.info.vae_factor)
    state = SamplerState(noise=step_noise or noise)
    key = resume.render_hash(pipe.files.identity(), settings.__dict__, start_noise,
                             [r.tag for r in pipe.plan.loras],
                             None if init_image is None else init_image.hash_parts())
    store = resume.ResumeStore(resume_dir, key) if resume_dir else None
    checkpoint = store.load() if store else None
    if checkpoint is not None and checkpoint.latents.shape == start_noise.shape and checkpoint.step >= first:
        latents, start, state.history = checkpoint.latents, checkpoint.step, checkpoint.history
        if checkpoint.rng_state is not None:
            noise.set_state(checkpoint.rng_state)
    elif init_image is None:
        latents, start = start_noise * np.float32(sampler.init_noise_sigma), 0
    else:  # the VAE encoder runs only here: a resumed render goes straight on from its checkpoint
        latents, start = _noised_picture(pipe, settings, sampler, first, start_noise, init_image, callback), first
    if start >= sampler.steps:
        return latents
    log.info("denoising with %s from step %d", sampler.describe(), start)
    load = pipe.lora_loader(settings.prompt)
    cond, uncond = _encode(pipe, settings, callback, load)
    model = load(pipe.unet_source)
    try:
        mode = guidance_mode_for(pipe, settings, model)
        unet = denoise.GuidedUNet(model, cond, uncond, settings.guidance, (settings.width, settings.height), mode,
                                  AESTHETIC_SCORES if pipe.info.requires_aesthetics_score else None)
        reports = StepReports(callback, sampler.steps, start, first, pipe.kind, FetchMeter(model))

        def on_step(done: int, current: np.ndarray, denoised: np.ndarray) -> None:
            if store is not None:
                store.save(resume.Checkpoint(done, current, dict(state.history), noise.get_state()))
            reports.step(done, current, denoised)

        return denoise.run_loop(sampler, unet, latents, state, start, on_step, reports.op)
    finally:
        release_model(model)


def guidance_mode_for(pipe: DenoisingPipeline, settings: RenderSettings, model: Runnable) -> str:
    """How the guidance passes run tonight: the plan's ``guidance_mode`` if set, else ``guidance_plan``'s
    choice for this model, size, precision and memory limit (logged with its reason)."""
    if pipe.plan.guidance_mode is not None:
        return pipe.plan.guidance_mode
    plan = guidance_plan.choose(pipe.kind, settings.width, settings.height,
                                guidance_plan.precision_of(model.streamed_weights), pipe.plan.memory_limit_mb,
                                settings.guided, pipe.plan.guidance_peaks(settings.width, settings.height))
    if settings.guided:
        log.info("guidance passes: %s (%s)", plan.mode, plan.reason)
    return plan.mode


def _noised_picture(pipe: DenoisingPipeline, settings: RenderSettings, sampler: Sampler, first: int,
                    start_noise: np.ndarray, init: img2img.InitImage, callback: ProgressCallback | None
                    ) -> np.ndarray:
    """The picture's latent (VAE encoder, seeded posterior draw) noised to step ``first``."""
    source, scaling = pipe.img2img_encoder()
    eps = img2img.posterior_draw(init, settings.seed, start_noise.shape)

    def report(fraction: float) -> None:
        if callback is not None:
            callback(Progress("encode", 0, 0, fraction, 0.0, None, kind=pipe.kind))

    report(0.0)
    latent = vae_encode.encode(pipe.load, source, init.pixels, eps, scaling,
                               pipe.info.vae_factor, pipe.plan.vae_tile or vae_tiles.DEFAULT_TILE,
                               pipe.plan.vae_tile_overlap, progress=report)
    return sampler.add_noise(latent, start_noise, first)


def _encode(pipe: DenoisingPipeline, settings: RenderSettings, callback: ProgressCallback | None,
            load: Callable[..., Runnable]) -> tuple[conditioning.Conditioning, conditioning.Conditioning | None]:
    """The prompt's and the negative prompt's conditioning, read with ``load`` (the LoRA loader)."""
    if callback is not None:
        callback(Progress("text", 0, settings.steps, 0.0, 0.0, None, kind=pipe.kind))
    prompt, negative = loras.strip_tags(settings.prompt), loras.strip_tags(settings.negative_prompt)
    return conditioning.encode_prompts(pipe.encoders, load, pipe.info, prompt, negative,
                                       settings.guided, log.warning, pipe.embeddings)
