"""``model.vae_decoder``: the owner's tiny VAE (TAESD / TAESDXL) in place of the model's own AutoencoderKL.

The folder is what ``frame model import --tiny-vae`` writes: ``vae_decoder/`` (and ``vae_encoder/`` for
image-to-image), each ``model.onnx`` + data + AutoencoderTiny's ``config.json``. ``taesd`` and
``taesdxl`` name ``<state_dir>/models/taesd[xl]`` (docs/models.md); anything else is a folder or an
http(s) URL of one, streamed like a model's components.

Latent scaling as diffusers' pipelines do it with an AutoencoderTiny: ``vae.decode(latents /
vae.config.scaling_factor)`` and ``vae.encode(image).latents * vae.config.scaling_factor`` with the
*tiny* VAE's factor (1.0 for TAESD and TAESDXL: they read and write the diffusion latents as they are,
not AutoencoderKL's unscaled ones), so the model's own factor (0.18215, 0.13025) is not applied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from frame.diffusion.model_files import ModelFiles, ModelLocation
from frame.engine.io.http_settings import HttpSettings
from frame.errors import FrameError, UsageError

NAMES = {"taesd": False, "taesdxl": True}  # name -> decodes SDXL latents
MODELS_FOLDER = "models"


@dataclass(frozen=True)
class TinyVae:
    """The resolved tiny VAE: its decoder's (and encoder's) model.onnx path or URL and scaling factor."""

    source: str  # the folder or URL, as configured (for messages)
    decoder: str
    encoder: str | None
    scaling_factor: float


class _TinyVaeFiles(ModelFiles):
    """A tiny-VAE folder read as a model's: local or URL (cached small files), but no model_index.json."""

    def __init__(self, source: str, cache_dir: str | None, http: HttpSettings | None) -> None:
        ModelLocation.__init__(self, source, cache_dir)
        self.http = http or HttpSettings()
        self._missing = set()


def folder_for(value: str, state_dir: str | None) -> str:
    """The folder or URL ``model.vae_decoder`` names (``taesd``/``taesdxl``: in the state dir's models/)."""
    if value in NAMES:
        return os.path.join(os.path.expanduser(state_dir or "."), MODELS_FOLDER, value)
    return value


def open_tiny_vae(value: str, state_dir: str | None, sdxl: bool, cache_dir: str | None = None,
                  http: HttpSettings | None = None) -> TinyVae | None:
    """The tiny VAE ``model.vae_decoder`` configures (None: "", the model's own VAE); one UsageError
    naming the setting when the folder is missing, is not a tiny VAE, or decodes the other family."""
    if not value:
        return None
    if value in NAMES and NAMES[value] != sdxl:
        want = "taesdxl" if sdxl else "taesd"
        raise UsageError(f"model.vae_decoder: {value} decodes {'SDXL' if NAMES[value] else 'SD 1.x/2.x'} latents, "
                         f"the model is {'SDXL' if sdxl else 'SD 1.x/2.x'}: use {want}")
    folder = folder_for(value, state_dir)
    hint = f" (write it with 'frame model import --tiny-vae {value} {folder}')" if value in NAMES else ""
    try:
        files = _TinyVaeFiles(folder, cache_dir, http)
        config = files.json("vae_decoder/config.json", required=False)
        decoder = files.onnx("vae_decoder")
    except FrameError as exc:
        raise UsageError(f"model.vae_decoder: {exc}{hint}") from None
    if config.get("_class_name") != "AutoencoderTiny":
        raise UsageError(f"model.vae_decoder: {files.describe('vae_decoder/config.json')} is not an AutoencoderTiny "
                         f"config{hint}")
    factor = config.get("scaling_factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor < 100:
        raise UsageError(f"model.vae_decoder: scaling_factor {factor!r} in vae_decoder/config.json is not a "
                         "positive number")
    encoder = files.onnx("vae_encoder") if files.has_model("vae_encoder") else None
    return TinyVae(folder, decoder, encoder, float(factor))
