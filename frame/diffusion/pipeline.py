"""Text to image on the streaming engine: SD 1.5, SDXL and Turbo from a diffusers ONNX export.

``load_pipeline(source)`` reads only small JSON files. ``generate`` then runs the components one at a
time so that a Pi Zero's memory holds a single model: the text encoder(s) (closed right after), the
UNet for every step (closed after the loop), then the VAE decoder. With ``resume_dir`` the loop
checkpoints after every step and continues from the last one after a crash or power cut.
``init_image`` turns a render into image-to-image (``frame.diffusion.img2img``): the VAE encoder
runs first, then the loop runs the last ``int(steps * strength)`` steps.

Here is what ties the stages together (which model runs when, on what); each stage's rules live in its
own module: ``render_settings``, ``conditioning``, ``denoise_run`` (the UNet loop: where it starts, what
each step saves and reports), ``denoise``, ``img2img``, ``resume``, ``progress``, ``vae``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

from frame.diffusion import (
    conditioning,
    denoise,
    denoise_run,
    img2img,
    loras,
    readahead,
    resume,
    rules,
    sizes,
    textual_inversion,
)
from frame.diffusion.denoise_run import LATENT_CHANNELS
from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import SDXL, ModelInfo
from frame.diffusion.noise import sources as noise_sources
from frame.diffusion.onnxstream_layout import OnnxStreamFiles, open_model_files
from frame.diffusion.pngmeta import GenerationParameters
from frame.diffusion.progress import Progress, ProgressCallback
from frame.diffusion.render_plan import RenderPlan
from frame.diffusion.render_settings import RenderSettings, resolve_settings
from frame.diffusion.samplers.base import Noise
from frame.diffusion.vae import decoder as vae
from frame.diffusion.vae import shapes as vae_shapes
from frame.diffusion.vae import tiles as vae_tiles
from frame.diffusion.vae.tiny import TinyVae
from frame.engine import load_model
from frame.engine.dynamic_shapes import dynamic_structure
from frame.engine.io.http_settings import HttpSettings
from frame.engine.lora import LoraUse
from frame.engine.memory import release_model
from frame.engine.runnable import Runnable
from frame.errors import UsageError
from frame.redact import redact_text, redact_url

log = logging.getLogger(__name__)

Loader = Callable[..., Runnable]  # load(source, dynamic_shapes=False, loras=()) -> the component (engine_loader)
PLAN_FIELDS = frozenset(f.name for f in dataclasses.fields(RenderPlan))


def engine_loader(weights: str = "prefetch", attention_slices: int | None = None,
                  http: HttpSettings | None = None, plans: str | None = None) -> Loader:
    """Load components with frame's streaming engine; ``weights``: the engine's provider name
    (``frame.engine.providers``; the configuration's "auto" is resolved by ``frame.diffusion.configured``);
    URLs are read with ``http`` (token, retries, weight cache). ``load(source, dynamic_shapes=True)``
    rewrites a model exported at a fixed image size to run at any size (``engine.dynamic_shapes``):
    the pipeline asks for it for a VAE decoder that must be tiled (``vae_shapes.VaeShapes.rewrite``);
    ``load(source, loras=...)`` adds LoRA changes as the weights stream (``frame.diffusion.loras``).
    ``plans``: where each component's plan is kept between nights (``frame.engine.plan_cache``)."""

    def load(source: str, dynamic_shapes: bool = False, loras: Sequence[LoraUse] = ()) -> Runnable:
        transform = functools.partial(dynamic_structure, http=http) if dynamic_shapes else None
        return load_model(source, weights=weights, attention_slices=attention_slices, transform=transform,
                          loras=loras, http=http, plans=plans)

    return load


class Pipeline:
    """One model export, ready to generate; components are loaded on demand and released after use.

    ``plan`` says how it renders (``RenderPlan``: VAE tiles and their counted peak, the guidance mode or
    what chooses it, read-ahead, LoRAs, the memory limit); it is read through ``plan`` and the
    read-only fields named after it, and replaced only whole, by ``use_plan``. A ``guidance_mode`` of
    None lets ``guidance_plan.choose`` pick per render from the model, size, precision and
    ``memory_limit_mb``, which reads the weights once per step wherever the estimated peak fits.
    """

    def __init__(self, files: ModelFiles | OnnxStreamFiles, info: ModelInfo, loader: Loader | None = None,
                 plan: RenderPlan | None = None, http: HttpSettings | None = None, noise: str | None = None) -> None:
        self.files = files
        self.noise = noise_sources.check_noise(noise)  # the settings' default noise source (model.noise)
        self.info = info
        self.http = http
        self.load: Loader = loader or engine_loader(http=http)
        plan = plan or RenderPlan()
        if plan.lora_folders is None:
            plan = dataclasses.replace(plan, lora_folders=tuple(loras.lora_folders(files.source, None)))
        self._plan = plan
        if isinstance(files, OnnxStreamFiles):
            self.encoders = files.encoders()
        else:
            names = [("text_encoder", "tokenizer")] + ([("text_encoder_2", "tokenizer_2")] if info.kind == SDXL else [])
            self.encoders = [conditioning.Encoder(model, files.local_folder(tok), files.onnx(model))
                             for model, tok in names]
        # textual-inversion files a prompt word may name (configured.py adds the state folder's)
        self.embeddings = textual_inversion.Embeddings(textual_inversion.model_folders(files.source))
        self.unet_source = files.onnx("unet")
        self.vae_source = files.onnx("vae_decoder")
        self.tiny_vae: TinyVae | None = None  # model.vae_decoder's tiny VAE (use_tiny_vae), else the model's own
        self._unet_signature: tuple[tuple[int, int] | None, frozenset[str]] | None = None
        self._vae_shapes: vae_shapes.VaeShapes | None = None
        self.lora_outcome = loras.LoraOutcome()  # the last render's (lora_loader)

    @property
    def plan(self) -> RenderPlan:
        """How this pipeline renders (``RenderPlan``); changed only through ``use_plan``."""
        return self._plan

    def use_plan(self, plan: RenderPlan) -> None:
        """Render by ``plan`` from now on: a value its caller learns after loading (``dataclasses.replace``
        of ``plan``: tonight's read-ahead and counted guidance peaks, the VAE's peak counter)."""
        if not isinstance(plan, RenderPlan):
            raise UsageError(f"use_plan takes a RenderPlan, not {type(plan).__name__}")
        if plan.lora_folders is None:
            plan = dataclasses.replace(plan, lora_folders=self._plan.lora_folders)
        if plan.vae_tile != self._plan.vae_tile:
            self._vae_shapes = None  # checked at the tile size
        self._plan = plan

    def __setattr__(self, name: str, value: object) -> None:
        if name in PLAN_FIELDS:  # a plan is replaced whole, never a field of it on the pipeline
            raise AttributeError(f"Pipeline.{name} is part of its RenderPlan: pass the plan in (Pipeline(plan=...), "
                                 f"use_plan(dataclasses.replace(pipe.plan, {name}=...)))")
        super().__setattr__(name, value)

    @property
    def kind(self) -> str:
        return self.info.kind

    def use_tiny_vae(self, tiny: TinyVae) -> None:
        """Decode (and, when it has an encoder, encode) with ``tiny`` instead of the model's VAE."""
        self.tiny_vae = tiny
        self.vae_source = tiny.decoder
        self._vae_shapes = None

    @property
    def decode_scaling(self) -> float:
        """What the latents are divided by before the decoder: the tiny VAE's own factor (1.0 for TAESD, as
        diffusers' ``latents / vae.config.scaling_factor`` with an AutoencoderTiny), else the model's."""
        return self.tiny_vae.scaling_factor if self.tiny_vae is not None else self.info.scaling_factor

    def unet_signature(self) -> tuple[tuple[int, int] | None, frozenset[str]]:
        """Fixed latent size (or None) and input names of the UNet export (graph structure only; read once)."""
        if self._unet_signature is None:
            model = self.load(self.unet_source)
            try:
                self._unet_signature = (denoise.static_latent_size(model), frozenset(i.name for i in model.inputs))
            finally:
                release_model(model)
        return self._unet_signature

    def vae_shapes(self) -> vae_shapes.VaeShapes:
        """Whether the VAE decoder's input size is fixed and whether it still runs in tiles (read once)."""
        if self._vae_shapes is None:
            if isinstance(self.files, OnnxStreamFiles) and self.tiny_vae is None:  # tiles by its own decoder
                self._vae_shapes = vae_shapes.VaeShapes(None, True)
            else:
                self._vae_shapes = vae_shapes.check_vae(self.vae_source,
                                                        self.plan.vae_tile or vae_tiles.DEFAULT_TILE,
                                                        self.http)
        return self._vae_shapes

    def unet_static_latent(self) -> tuple[int, int] | None:
        """Fixed latent size of the UNet export, or None when its spatial axes are dynamic."""
        return self.unet_signature()[0]

    def auto_size(self, aspect: float) -> tuple[int, int]:
        """(width, height) near the native pixel area with aspect ratio ``aspect`` (width / height)."""
        return sizes.auto_size(self.info, aspect, self.unet_static_latent())

    def settings(self, prompt: str, negative_prompt: str | None = "", steps: int | None = None,
                 guidance: float | None = None, sampler: str | None = None, seed: int = 0,
                 width: int | None = None, height: int | None = None, strength: float | None = None,
                 noise: str | None = None, *, warn: bool = True) -> RenderSettings:
        """Fill in defaults and check every value once (clear errors before any model is run; each
        warning logged here, once), giving the record ``generate`` takes. ``warn=False``: a probe
        (is this refused? what will be counted?) that leaves the warnings to the render's own call.

        ``seed`` is the seed to paint with: "random" (-1) is decided where the render is asked for
        (``frame.seeds.resolve_seed``: the night's job, ``frame render``, the render server's request),
        so the number stored with the job is the one painted. ``strength`` (image-to-image) must be in
        (0, 1]; unset steps then default to the fewest that run at least one step (a Turbo model's 1
        step at strength 0.5 would run none: 2). ``noise``: the seed's random source
        (``frame.diffusion.noise``; None: the pipeline's, ``model.noise``).
        """
        settings, findings = resolve_settings(self.info, self.unet_signature, self.noise, prompt, negative_prompt,
                                              steps, guidance, sampler, seed, width, height, strength, noise)
        for finding in findings if warn else ():
            log.warning("%s", finding.message)
        return settings

    def generate(self, settings: RenderSettings, *, init_noise: np.ndarray | None = None,
                 callback: ProgressCallback | None = None, resume_dir: str | os.PathLike | None = None,
                 tiled_decode: bool | None = None, init_image: Image.Image | str | os.PathLike | None = None
                 ) -> Image.Image:
        """Render ``settings`` (from ``Pipeline.settings``, checked there once); the image carries the
        A1111 ``parameters`` text in ``image.info``.

        ``settings.negative_prompt=None`` follows diffusers: the empty prompt, or zeros for SDXL
        exports with ``force_zeros_for_empty_prompt``; ``""`` is encoded like any prompt.

        ``init_noise`` is standard-normal (1, 4, H/8, W/8) noise, scaled by the sampler's initial sigma
        (diffusers' ``latents=``); with an ``init_image`` it is the noise added to the picture's latent.
        ``resume_dir`` enables per-step checkpoints (cleared when done). ``init_image`` (picture or
        file) makes it image-to-image at ``settings.strength`` (``img2img.DEFAULT_STRENGTH`` is the
        usual one); the picture is fitted to the render size (``img2img.fit``).
        """
        if not isinstance(settings, RenderSettings):
            raise UsageError(f"generate takes the RenderSettings from Pipeline.settings, not {type(settings).__name__}")
        start = None if init_image is None else img2img.prepare(init_image, settings.width, settings.height)
        latents = self.denoise_settings(settings, init_noise, callback, resume_dir, init_image=start)
        image = self.decode(latents, callback, tiled_decode)
        image.info["parameters"] = self.parameters(settings, start).to_text()
        if resume_dir is not None:
            resume.ResumeStore(resume_dir, "").clear()
        return image

    def parameters(self, settings: RenderSettings, init: img2img.InitImage | None = None) -> GenerationParameters:
        prompt = " ".join([settings.prompt] + [r.tag for r in self.plan.loras if r.tag not in settings.prompt])
        return GenerationParameters(prompt, (settings.negative_prompt or "") if settings.guided else "",
                                    settings.steps, settings.sampler, settings.guidance, settings.seed,
                                    settings.width, settings.height, os.path.basename(self.info.name.rstrip("/")),
                                    settings.strength, None if init is None else init.digest,
                                    noise_sources.A1111_RNG.get(settings.noise))

    def denoise_settings(self, settings: RenderSettings, init_noise: np.ndarray | None = None,
                         callback: ProgressCallback | None = None,
                         resume_dir: str | os.PathLike | None = None, step_noise: Noise | None = None,
                         init_image: img2img.InitImage | None = None) -> np.ndarray:
        """Run the sampling loop for resolved settings; returns the final latents
        (``denoise_run.denoise_settings`` says how it starts, resumes and reports)."""
        return denoise_run.denoise_settings(self, settings, init_noise, callback, resume_dir, step_noise, init_image)

    def guidance_mode_for(self, settings: RenderSettings, model: Runnable) -> str:
        """How the guidance passes run tonight (``denoise_run.guidance_mode_for``)."""
        return denoise_run.guidance_mode_for(self, settings, model)

    def vae_encoder_source(self) -> str:
        """Path or URL of ``vae_encoder/model.onnx``, or a UsageError saying image-to-image needs it."""
        return self.img2img_encoder()[0]

    def img2img_encoder(self) -> tuple[str, float]:
        """The img2img encoder and the factor its latents are multiplied by: the tiny VAE's when it has one
        (TAESD's latents are the diffusion latents, factor 1.0), else the model's own (a tiny decoder
        reads those as well: both VAEs share the diffusion latent space)."""
        if self.tiny_vae is not None and self.tiny_vae.encoder is not None:
            return self.tiny_vae.encoder, self.tiny_vae.scaling_factor
        if isinstance(self.files, OnnxStreamFiles) or not self.files.has_model("vae_encoder"):
            raise UsageError(f"{redact_url(self.files.source)} has no vae_encoder/model.onnx, which "
                             "image-to-image needs ('optimum-cli export onnx' writes it; OnnxStream's folders "
                             "have none)")
        return self.files.onnx("vae_encoder"), self.info.scaling_factor

    def lora_loader(self, prompt: str) -> Loader:
        """``self.load`` with the LoRAs of ``model.loras`` and the prompt's tags and tonight's read-ahead
        (the plan's ``readahead``). A LoRA that cannot be used is left out with a warning (the picture is
        painted without it); ``self.lora_outcome`` says what became of each (``loras.LoraOutcome``)."""
        requests = list(self.plan.loras) + loras.split_tags(prompt)[1]
        components = {self.unet_source: "unet", **{e.source: e.name for e in self.encoders}}
        self.lora_outcome = loras.LoraOutcome()
        load = loras.loader(self.load, requests, self.plan.lora_folders, components, self.lora_outcome) \
            if requests else self.load
        return readahead.loader(load, self.plan.readahead, list(components.items()))

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
        if isinstance(self.files, OnnxStreamFiles) and self.tiny_vae is None:  # its 32x32 tiles when larger
            source = self.files.vae_for(latents.shape[2], latents.shape[3], tiled)
        load, relax = self.load, False
        if source == self.vae_source:
            shapes = self.vae_shapes()
            relax = shapes.tileable and not shapes.rewrite
            if shapes.rewrite:  # a static export whose ops bake the size: rewritten at load, then tiled
                def load(path: str) -> Runnable:
                    return self.load(path, dynamic_shapes=True)
        load = readahead.loader(load, self.plan.readahead, [(source, "vae_decoder")])
        plan = self.plan
        pixels = vae.decode(load, source, latents, self.decode_scaling, plan.vae_tile, plan.vae_tile_overlap, tiled,
                            report, relax_static=relax, peak_mb=plan.vae_peak_mb, limit_mb=plan.memory_limit_mb)
        return Image.fromarray(pixels, "RGB")

    def embed_text(self, texts: list[str]) -> np.ndarray:
        """(len(texts), D) pooled text embeddings (SD 1.5: pooler_output; SDXL: encoder 2's text_embeds)."""
        if isinstance(texts, str):
            texts = [texts]
        encoder = self.encoders[-1]
        texts = [loras.strip_tags(text) for text in texts]
        return conditioning.pooled_embeddings(encoder, self.load, texts, projected=self.kind == SDXL,
                                              embeddings=self.embeddings,
                                              table="clip_g" if self.kind == SDXL else "")


def load_pipeline(source: str | os.PathLike, cache_dir: str | os.PathLike | None = None, weights: str = "prefetch",
                  attention_slices: int | None = None, loader: Loader | None = None, plan: RenderPlan | None = None,
                  http: HttpSettings | None = None, noise: str | None = None) -> Pipeline:
    """Open a diffusers ONNX export or an OnnxStream model folder (folder or http(s) base URL); the kind
    comes from model_index.json or from OnnxStream's folder names. ``weights``: the engine's provider
    name; ``plan``: how it renders (``RenderPlan``; None: the defaults); ``http``: how URLs are read
    (``frame.engine.io.http_settings``). Every caller that starts from the configuration goes through
    ``frame.diffusion.configured``, which decides these values. ``noise``: the renders' default random
    source (``model.noise``)."""
    files, info = open_model_files(source, cache_dir, http)
    plan = plan or RenderPlan()
    rules.raise_first_error(rules.tile_findings(plan.vae_tile, plan.vae_tile_overlap))
    pipe = Pipeline(files, info, loader or engine_loader(weights, attention_slices, http), plan, http, noise)
    shapes = pipe.vae_shapes()  # said at load, so a night's log names a decoder that cannot be tiled at once
    if shapes.warning(pipe.vae_source):
        log.warning("%s", redact_text(shapes.warning(pipe.vae_source)))
    elif shapes.note():
        log.info("%s", shapes.note())
    return pipe
