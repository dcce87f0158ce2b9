"""What kind of Stable Diffusion an export is, and the defaults that follow from it.

Detection reads only small JSON files: ``model_index.json`` names the components (``text_encoder_2``
means SDXL), the component ``config.json`` files give the native size and the VAE scaling factor, and
the scheduler config plus the model's name (folder name or ``_name_or_path``) tell a few-step
Turbo/Lightning model (name contains "turbo", or ``timestep_spacing: trailing`` without zero-SNR
rescaling) from a regular one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from frame.diffusion.model_files import ModelFiles
from frame.errors import FrameError
from frame.models import DEFAULT_STEPS_KEY
from frame.redact import redact_text, redact_url

log = logging.getLogger(__name__)

SD15, SDXL = "sd15", "sdxl"
DEFAULT_SCALING = {SD15: 0.18215, SDXL: 0.13025}
DEFAULT_SAMPLE_SIZE = {SD15: 64, SDXL: 128}
# Defaults when model.steps / model.guidance are null (config.yaml's comments quote these numbers).
REGULAR_STEPS, TURBO_STEPS = 20, 1
DEFAULT_GUIDANCE = {SD15: 7.5, SDXL: 5.0}


@dataclass(frozen=True)
class ModelInfo:
    """Facts about one export that generation needs (all from JSON, nothing loaded)."""

    kind: str
    turbo: bool
    name: str
    scheduler_config: dict[str, Any]
    native_latent: tuple[int, int]  # (height, width) in latent pixels
    vae_factor: int  # pixels per latent pixel
    latent_multiple: int  # latent sides must be multiples of this (UNet down-sampling)
    scaling_factor: float
    force_zeros_for_empty_prompt: bool
    steps_override: int | None = None  # the model's own default, when it has one (the demo model)
    # SDXL refiner-type exports (StableDiffusionXLImg2ImgPipeline config): time_ids carry an aesthetic score
    requires_aesthetics_score: bool = False

    @property
    def default_steps(self) -> int:
        """Steps when ``model.steps`` / ``--steps`` are not set: 1 for Turbo, 20 otherwise, or the
        model's own from its model_index.json (``frame.models.DEFAULT_STEPS_KEY``: the demo's 8)."""
        if self.steps_override is not None:
            return self.steps_override
        return TURBO_STEPS if self.turbo else REGULAR_STEPS

    @property
    def default_guidance(self) -> float:
        return 0.0 if self.turbo else DEFAULT_GUIDANCE[self.kind]

    @property
    def native_size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return self.native_latent[1] * self.vae_factor, self.native_latent[0] * self.vae_factor

    @property
    def label(self) -> str:
        return f"{'SDXL' if self.kind == SDXL else 'SD 1.5'}{' Turbo' if self.turbo else ''}"


def _present(index: dict[str, Any], key: str) -> bool:
    value = index.get(key)
    return isinstance(value, list) and any(v is not None for v in value)


def detect_kind(index: dict[str, Any], files: ModelFiles) -> str:
    has_first = _present(index, "text_encoder") or files.exists("text_encoder/model.onnx")
    has_second = _present(index, "text_encoder_2") or files.exists("text_encoder_2/model.onnx")
    if has_second and not has_first:
        raise FrameError(f"{redact_url(files.source)}: only text_encoder_2 present — SDXL refiner exports "
                         "are not supported")
    if not has_first:
        raise FrameError(f"{redact_url(files.source)}: model_index.json lists no text_encoder")
    return SDXL if has_second else SD15


def is_turbo(name: str, scheduler: dict[str, Any]) -> bool:
    """Few-step distilled models run 1–4 steps without classifier-free guidance."""
    if "turbo" in name.lower():
        return True
    return scheduler.get("timestep_spacing") == "trailing" and not scheduler.get("rescale_betas_zero_snr", False)


def _sample_size(unet: dict[str, Any], kind: str) -> tuple[int, int]:
    size = unet.get("sample_size", DEFAULT_SAMPLE_SIZE[kind])
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[1])
    return int(size), int(size)


def _own_default_steps(index: dict[str, Any], files: ModelFiles) -> int | None:
    """The model's own default step count from its model_index.json (``DEFAULT_STEPS_KEY``: the demo
    model's 8, kept by a converted copy and over HTTP), else None: the default of its kind."""
    value = index.get(DEFAULT_STEPS_KEY)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FrameError(f"{redact_url(files.source)}: model_index.json's {DEFAULT_STEPS_KEY} must be a "
                         f"positive whole number, got {value!r}")
    return value


def read_model_info(files: ModelFiles) -> ModelInfo:
    index = files.json("model_index.json")
    kind = detect_kind(index, files)
    scheduler = files.json("scheduler/scheduler_config.json")
    unet = files.json("unet/config.json", required=False)
    vae = files.json("vae_decoder/config.json", required=False)
    folder_name = files.source.rstrip("/").rsplit("/", 1)[-1]
    name = f"{folder_name} {index.get('_name_or_path', '')}"
    vae_factor = 2 ** (len(vae.get("block_out_channels", [0] * 4)) - 1)
    unet_levels = len(unet.get("block_out_channels", [0] * 4))
    info = ModelInfo(
        kind=kind,
        turbo=is_turbo(name, scheduler),
        # the name goes into logs, messages and every picture's metadata: never a URL's credentials
        name=redact_text(str(index.get("_name_or_path") or "")) or redact_url(files.source),
        scheduler_config=scheduler,
        native_latent=_sample_size(unet, kind),
        vae_factor=vae_factor,
        latent_multiple=2 ** (unet_levels - 1),
        scaling_factor=float(vae.get("scaling_factor") or DEFAULT_SCALING[kind]),
        force_zeros_for_empty_prompt=bool(index.get("force_zeros_for_empty_prompt", kind == SDXL)),
        steps_override=_own_default_steps(index, files),
        requires_aesthetics_score=bool(index.get("requires_aesthetics_score", False)),
    )
    log.info("model %s: %s, native %dx%d, %d-pixel size steps", info.name, info.label, *info.native_size,
             info.latent_multiple * info.vae_factor)
    return info
