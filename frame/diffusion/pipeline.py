"""Text to image on the streaming engine: SD 1.5, SDXL and Turbo from a diffusers ONNX export.

``load_pipeline(source)`` reads only small JSON files. ``generate`` then runs the components one at a
time so that a Pi Zero's memory holds a single model: the text encoder(s) (closed right after), the
UNet for every step (closed after the loop), then the VAE decoder. With ``resume_dir`` the loop
checkpoints after every step and continues from the last one after a crash or power cut.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from frame.diffusion import conditioning, denoise, resume, sizes, vae, vae_shapes
from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import SDXL, ModelInfo, read_model_info
from frame.diffusion.onnxstream_layout import OnnxStreamFiles, is_onnxstream_folder
from frame.diffusion.pngmeta import GenerationParameters
from frame.diffusion.progress import EtaClock, Progress
from frame.diffusion.samplers import NoiseSource, SamplerState, make_sampler, resolve_sampler_name
from frame.diffusion.samplers.base import Noise
from frame.engine.memory import trim_free_memory
from frame.errors import FrameError, UsageError

log = logging.getLogger(__name__)

Loader = Callable[[str], Any]
ProgressCallback = Callable[[Progress], None]
LATENT_CHANNELS = 4


def engine_loader(weights: str = "auto", attention_slices: int | None = None) -> Loader:
    """Load components with frame's streaming engine; ``weights`` as in the config (auto = prefetch)."""

    def load(source: str) -> Any:
        from frame.engine import load_model

        return load_model(source, weights="prefetch" if weights == "auto" else weights,
                          attention_slices=attention_slices)

    return load


@dataclass(frozen=True)
class Settings:
    """Resolved generation parameters (defaults filled in from the model kind)."""

    prompt: str
    negative_prompt: str | None  # None: diffusers' "no negative prompt" (zeros for SDXL)
    steps: int
    guidance: float
    sampler: str
    seed: int
    width: int
    height: int
    guidance_embedded: bool = False  # LCM-distilled UNet: guidance is an input, no unconditional pass

    @property
    def guided(self) -> bool:
        """Classifier-free guidance needs the unconditional pass only when guidance > 1 (as diffusers)."""
        return self.guidance > 1.0 and not self.guidance_embedded


class Pipeline:
    """One model export, ready to generate; components are loaded on demand and released after use.

    ``cfg_batch=True`` runs the unconditional and conditional UNet passes as one batch of two: the
    weights are streamed once per step instead of twice, but activations double (full-size SD 1.5 at
    512×512: 337 MB peak instead of 284 MB, see docs/benchmarks-diffusion.md), so the default keeps
    the Pi-friendly two passes.
    """

    def __init__(self, files: ModelFiles | OnnxStreamFiles, info: ModelInfo, loader: Loader | None = None,
                 vae_tile: int = 32, vae_tile_overlap: int = 8, cfg_batch: bool = False) -> None:
        self.files = files
        self.info = info
        self.load = loader or engine_loader()
        self.vae_tile = vae_tile
        self.vae_tile_overlap = vae_tile_overlap
        self.cfg_batch = cfg_batch
        if isinstance(files, OnnxStreamFiles):
            self.encoders = files.encoders()
        else:
            names = [("text_encoder", "tokenizer")] + ([("text_encoder_2", "tokenizer_2")] if info.kind == SDXL else [])
            self.encoders = [conditioning.Encoder(model, files.local_folder(tok), files.onnx(model))
                             for model, tok in names]
        self.unet_source = files.onnx("unet")
        self.vae_source = files.onnx("vae_decoder")
        self._unet_signature: tuple[tuple[int, int] | None, frozenset[str]] | None = None
        self._vae_shapes: vae_shapes.VaeShapes | None = None

    @property
    def kind(self) -> str:
        return self.info.kind

    def unet_signature(self) -> tuple[tuple[int, int] | None, frozenset[str]]:
        """Fixed latent size (or None) and input names of the UNet export (graph structure only; read once)."""
        if self._unet_signature is None:
            model = self.load(self.unet_source)
            try:
                self._unet_signature = (denoise.static_latent_size(model), frozenset(i.name for i in model.inputs))
            finally:
                _close(model)
        return self._unet_signature

    def vae_shapes(self) -> vae_shapes.VaeShapes:
        """Whether the VAE decoder's input size is fixed and whether it still runs in tiles (read once)."""
        if self._vae_shapes is None:
            if isinstance(self.files, OnnxStreamFiles):  # its own folder format: tiles by its own decoder
                self._vae_shapes = vae_shapes.VaeShapes(None, True)
            else:
                self._vae_shapes = vae_shapes.check_vae(self.vae_source, self.vae_tile)
        return self._vae_shapes

    def unet_static_latent(self) -> tuple[int, int] | None:
        """Fixed latent size of the UNet export, or None when its spatial axes are dynamic."""
        return self.unet_signature()[0]

    def auto_size(self, aspect: float) -> tuple[int, int]:
        """(width, height) near the native pixel area with aspect ratio ``aspect`` (width / height)."""
        return sizes.auto_size(self.info, aspect, self.unet_static_latent())

    def settings(self, prompt: str, negative_prompt: str | None = "", steps: int | None = None,
                 guidance: float | None = None, sampler: str | None = None, seed: int = 0,
                 width: int | None = None, height: int | None = None) -> Settings:
        """Fill in defaults and check every value (clear errors before any model is run)."""
        if not isinstance(prompt, str) or not isinstance(negative_prompt, (str, type(None))):
            raise UsageError("prompt and negative prompt must be strings")
        sampler = resolve_sampler_name(sampler)
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
        steps = self.info.default_steps if steps is None else steps
        if not isinstance(steps, (int, np.integer)) or steps < 1:
            raise UsageError(f"steps must be a positive integer, got {steps!r}")
        guidance = self.info.default_guidance if guidance is None else float(guidance)
        if guidance < 0:
            raise UsageError(f"guidance must be ≥ 0, got {guidance}")
        if self.info.turbo and (steps > 4 or guidance > 1):
            log.warning("%s models are distilled for 1-4 steps without guidance; got %d steps, guidance %g",
                        self.info.label, steps, guidance)
        static = self.unet_static_latent()
        native_w, native_h = sizes.auto_size(self.info, 1.0, static) if static else self.info.native_size
        width, height = native_w if width is None else width, native_h if height is None else height
        sizes.check_size(width, height, self.info, static)
        embedded = "timestep_cond" in self.unet_signature()[1]
        return Settings(prompt, negative_prompt, int(steps), guidance, sampler, int(seed), width, height, embedded)

    def generate(self, prompt: str, negative_prompt: str | None = "", steps: int | None = None,
                 guidance: float | None = None, sampler: str | None = None, seed: int = 0,
                 width: int | None = None, height: int | None = None, init_noise: np.ndarray | None = None,
                 callback: ProgressCallback | None = None, resume_dir: str | os.PathLike | None = None,
                 tiled_decode: bool | None = None) -> Image.Image:
        """Render ``prompt``; the image carries the A1111 ``parameters`` text in ``image.info``.

        ``negative_prompt=None`` follows diffusers: the empty prompt, or zeros for SDXL exports with
        ``force_zeros_for_empty_prompt``; ``""`` is encoded like any prompt.

        ``init_noise`` is standard-normal (1, 4, H/8, W/8) noise, scaled by the sampler's initial sigma
        (diffusers' ``latents=``). ``resume_dir`` enables per-step checkpoints (cleared when done).
        """
        settings = self.settings(prompt, negative_prompt, steps, guidance, sampler, seed, width, height)
        latents = self.denoise_settings(settings, init_noise, callback, resume_dir)
        image = self.decode(latents, callback, tiled_decode)
        image.info["parameters"] = self.parameters(settings).to_text()
        if resume_dir is not None:
            resume.ResumeStore(resume_dir, "").clear()
        return image

    def parameters(self, settings: Settings) -> GenerationParameters:
        return GenerationParameters(settings.prompt, (settings.negative_prompt or "") if settings.guided else "",
                                    settings.steps, settings.sampler, settings.guidance, settings.seed,
                                    settings.width, settings.height, os.path.basename(self.info.name.rstrip("/")))

    def initial_noise(self, settings: Settings, init_noise: np.ndarray | None, noise: NoiseSource) -> np.ndarray:
        shape = (1, LATENT_CHANNELS, settings.height // self.info.vae_factor, settings.width // self.info.vae_factor)
        if init_noise is None:
            return noise.normal(shape)
        init_noise = np.asarray(init_noise)
        if init_noise.shape != shape:
            raise UsageError(f"init_noise has shape {init_noise.shape}; {settings.width}x{settings.height} "
                             f"needs {shape}")
        return init_noise.astype(np.float32)

    def _hash(self, settings: Settings, init_noise: np.ndarray) -> str:
        return resume.parameters_hash({
            "format": 1, "model": self.files.identity(), "settings": settings.__dict__,
            "init_noise": resume.array_hash(init_noise),
        })

    def denoise_settings(self, settings: Settings, init_noise: np.ndarray | None = None,
                         callback: ProgressCallback | None = None,
                         resume_dir: str | os.PathLike | None = None, step_noise: Noise | None = None
                         ) -> np.ndarray:
        """Run the sampling loop for resolved settings; returns the final latents.

        ``step_noise`` replaces the seeded noise that ancestral samplers draw after the initial latent
        (tests replay the noise diffusers drew); it is not checkpointed.
        """
        sampler = make_sampler(settings.sampler, self.info.scheduler_config, settings.steps)
        noise = NoiseSource(settings.seed)
        start_noise = self.initial_noise(settings, init_noise, noise)
        state = SamplerState(noise=step_noise or noise)
        latents, start = start_noise * np.float32(sampler.init_noise_sigma), 0
        store = resume.ResumeStore(resume_dir, self._hash(settings, start_noise)) if resume_dir else None
        checkpoint = store.load() if store else None
        if checkpoint is not None and checkpoint.latents.shape == latents.shape:
            latents, start, state.history = checkpoint.latents, checkpoint.step, checkpoint.history
            if checkpoint.rng_state is not None:
                noise.set_state(checkpoint.rng_state)
        if start >= sampler.steps:
            return latents
        log.info("denoising with %s from step %d", sampler.describe(), start)
        cond, uncond = self._encode(settings, callback)
        clock = EtaClock(start, sampler.steps)

        def on_op(index: int, fraction: float) -> None:
            if callback is not None:
                callback(Progress("unet", index, sampler.steps, fraction, clock.fraction(index, fraction),
                                  clock.eta(index, fraction), kind=self.kind))

        def on_step(done: int, current: np.ndarray, denoised: np.ndarray) -> None:
            if store is not None:
                store.save(resume.Checkpoint(done, current, dict(state.history), noise.get_state()))
            if callback is not None:
                callback(Progress("unet", done, sampler.steps, 0.0, clock.fraction(done, 0.0),
                                  clock.eta(done, 0.0), True, current, denoised, self.kind))

        model = self.load(self.unet_source)
        try:
            unet = denoise.GuidedUNet(model, cond, uncond, settings.guidance, (settings.width, settings.height),
                                      self.cfg_batch)
            return denoise.run_loop(sampler, unet, latents, state, start, on_step, on_op)
        finally:
            _close(model)

    def _encode(self, settings: Settings, callback: ProgressCallback | None
                ) -> tuple[conditioning.Conditioning, conditioning.Conditioning | None]:
        if callback is not None:
            callback(Progress("text", 0, settings.steps, 0.0, 0.0, None, kind=self.kind))
        return conditioning.encode_prompts(self.encoders, self.load, self.info, settings.prompt,
                                           settings.negative_prompt, settings.guided, log.warning)

    def decode(self, latents: np.ndarray, callback: ProgressCallback | None = None,
               tiled: bool | None = None) -> Image.Image:
        """Latents → RGB image (tiled automatically when larger than one VAE tile)."""
        latents = np.asarray(latents, dtype=np.float32)
        if latents.ndim != 4 or latents.shape[:2] != (1, LATENT_CHANNELS):
            raise UsageError(f"latents must have shape (1, {LATENT_CHANNELS}, h, w), got {latents.shape}")

        def report(fraction: float) -> None:
            if callback is not None:
                callback(Progress("vae", 0, 0, fraction, 1.0, None, kind=self.kind))

        source = self.vae_source
        if isinstance(self.files, OnnxStreamFiles):  # its 32x32 tile decoder when the latent is larger
            source = self.files.vae_for(latents.shape[2], latents.shape[3], tiled)
        relax = source == self.vae_source and self.vae_shapes().tileable
        pixels = vae.decode(self.load, source, latents, self.info.scaling_factor, self.vae_tile,
                            self.vae_tile_overlap, tiled, report, relax_static=relax)
        return Image.fromarray(pixels, "RGB")

    def embed_text(self, texts: list[str]) -> np.ndarray:
        """(len(texts), D) pooled text embeddings (SD 1.5: pooler_output; SDXL: encoder 2's text_embeds)."""
        if isinstance(texts, str):
            texts = [texts]
        encoder = self.encoders[-1]
        return conditioning.pooled_embeddings(encoder, self.load, list(texts), projected=self.kind == SDXL)


def _close(model: Any) -> None:
    close = getattr(model, "close", None)
    if close is not None:
        close()
    gc.collect()
    trim_free_memory()  # the model's structure is garbage only now


def load_pipeline(source: str | os.PathLike, cache_dir: str | os.PathLike | None = None, weights: str = "auto",
                  attention_slices: int | None = None, vae_tile: int = 32, vae_tile_overlap: int = 8,
                  loader: Loader | None = None, cfg_batch: bool = False) -> Pipeline:
    """Open a diffusers ONNX export or an OnnxStream model folder (folder or http(s) base URL); the kind
    comes from model_index.json or from OnnxStream's folder names."""
    files, info = open_model_files(source, cache_dir)
    if vae_tile < 1 or not 0 <= vae_tile_overlap < vae_tile:
        raise UsageError(f"VAE tiles: need tile ≥ 1 and 0 ≤ overlap < tile, got {vae_tile} / {vae_tile_overlap}")
    pipe = Pipeline(files, info, loader or engine_loader(weights, attention_slices), vae_tile, vae_tile_overlap,
                    cfg_batch)
    shapes = pipe.vae_shapes()  # said at load, so a night's log names a decoder that cannot be tiled at once
    if shapes.warning(pipe.vae_source):
        log.warning("%s", shapes.warning(pipe.vae_source))
    elif shapes.note():
        log.info("%s", shapes.note())
    return pipe


def open_model_files(source: str | os.PathLike, cache_dir: str | os.PathLike | None = None
                     ) -> tuple[ModelFiles | OnnxStreamFiles, ModelInfo]:
    """The export's files and facts: a diffusers layout (model_index.json) or OnnxStream's published one."""
    text = str(source)
    if not text.startswith(("http://", "https://")) and is_onnxstream_folder(text):
        files: ModelFiles | OnnxStreamFiles = OnnxStreamFiles(text, cache_dir)
    else:
        try:
            files = ModelFiles(source, cache_dir)
        except FrameError as exc:
            if not text.startswith(("http://", "https://")) or "model_index.json is missing" not in str(exc):
                raise
            files = OnnxStreamFiles(text, cache_dir)
    info = files.model_info() if isinstance(files, OnnxStreamFiles) else read_model_info(files)
    return files, info
