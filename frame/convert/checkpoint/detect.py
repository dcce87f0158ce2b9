"""What a checkpoint's keys are: sorted into parts by prefix, each part's keys under diffusers' names.

The decision (``plan.detect`` does steps 3 and 4), in order (docs/models.md, "Importing a checkpoint",
says the same for owners):

1. A LoRA, LyCORIS or textual-inversion file is refused by its key names (it changes a model; it is
   not one).
2. The keys are sorted by prefix: ``model.diffusion_model.`` (UNet), ``first_stage_model.`` (VAE),
   ``cond_stage_model.transformer.`` (CLIP ViT-L: SD 1.x), ``cond_stage_model.model.`` (OpenCLIP ViT-H:
   SD 2.x), ``conditioner.embedders.0.transformer.`` + ``conditioner.embedders.1.model.`` (CLIP-L +
   OpenCLIP bigG: SDXL), ``model_ema.`` (EMA copies of the UNet), and the training buffers
   (``alphas_cumprod``...) that nothing needs. A file of only ``encoder.``/``decoder.`` keys is a VAE.
   Any other key is refused, with the prefixes found.
3. The UNet must take 4 latent channels (9 is an inpainting model, 8 instruct-pix2pix) and attend to
   the text encoders' width (768, 1024, or 768 + 1280 = 2048).
4. Prediction type and size: the file's ``modelspec.*`` metadata or a ``v_pred`` key where it says;
   else ``--prediction``; else SD 1.x and SDXL predict epsilon and SD 2.x v (the 768-px SD 2.x models;
   SD 2.x 512-base and SD Turbo predict epsilon: give ``--prediction epsilon``). "turbo" in the file's
   name or title makes it a Turbo model (few steps, no guidance, its trailing schedule; SD Turbo and
   SDXL Turbo are 512 px).
"""

from __future__ import annotations

import re
from collections import Counter

from frame.convert.checkpoint.components import Take
from frame.convert.checkpoint.configs import SD1, SD2, SDXL
from frame.convert.checkpoint.reader import Checkpoint
from frame.convert.checkpoint.text_keys import clip_names, open_clip_names
from frame.convert.checkpoint.unet_keys import UnknownKeys, unet_names
from frame.convert.checkpoint.vae_keys import vae_names
from frame.errors import UsageError

UNET, VAE = "model.diffusion_model.", "first_stage_model."
CLIP_L, OPEN_CLIP_H = "cond_stage_model.transformer.", "cond_stage_model.model."
XL_CLIP_L, XL_BIGG, XL_REFINER = ("conditioner.embedders.0.transformer.", "conditioner.embedders.1.model.",
                                  "conditioner.embedders.0.model.")
EMA = "model_ema."
TRAINING_BUFFERS = {
    "betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod",
    "log_one_minus_alphas_cumprod", "sqrt_recip_alphas_cumprod", "sqrt_recipm1_alphas_cumprod",
    "posterior_variance", "posterior_log_variance_clipped", "posterior_mean_coef1", "posterior_mean_coef2",
    "logvar", "lvlb_weights", "v_pred", "ztsnr", "model_ema.decay", "model_ema.num_updates", "denoiser.sigmas",
    "denoiser.log_sigmas"}
LORA = re.compile(r"(^|[._])(lora_(up|down|A|B)|lora_unet|lora_te\d?|hada_w\d|lokr_w\d|lora_mid)([._]|$)")
EMBEDDING = {"emb_params", "clip_l", "clip_g", "string_to_param.*", "string_to_token.*", "name", "step"}


def refuse_non_checkpoints(checkpoint: Checkpoint) -> None:
    keys = list(checkpoint.tensors)
    if not keys:
        raise UsageError(f"{checkpoint.location}: holds no tensors, not a checkpoint")
    lora = [k for k in keys if LORA.search(k)]
    if lora:
        raise UsageError(f"{checkpoint.location}: a LoRA ({len(lora)} LoRA keys such as {lora[0]}), not a "
                         "checkpoint: list it in model.loras or merge it with 'frame model convert --lora'")
    if keys and all(k in EMBEDDING or k.split(".")[0] + ".*" in EMBEDDING for k in keys):
        raise UsageError(f"{checkpoint.location}: a textual-inversion embedding ({', '.join(keys[:3])}), not a "
                         "checkpoint: put it in the embeddings folder")


def _prefix_counts(keys: list[str]) -> str:
    counts = Counter(".".join(k.split(".")[:2]) if "." in k else k for k in keys)
    return ", ".join(f"{n} under {p!r}" for p, n in counts.most_common(4))


def split(checkpoint: Checkpoint) -> dict[str, list[str]]:
    """Keys by the part they belong to; UsageError naming the prefixes of any unknown keys."""
    parts: dict[str, list[str]] = {}
    unknown = []
    prefixes = (UNET, VAE, XL_REFINER, XL_CLIP_L, XL_BIGG, CLIP_L, OPEN_CLIP_H, EMA)
    for key in checkpoint.tensors:
        if key in TRAINING_BUFFERS:
            continue
        prefix = next((p for p in prefixes if key.startswith(p)), None)
        if prefix is None and key.split(".")[0] in ("encoder", "decoder", "quant_conv", "post_quant_conv"):
            prefix = "vae-file"
        if prefix is None:
            unknown.append(key)
        else:
            parts.setdefault(prefix, []).append(key)
    if unknown:
        found = _prefix_counts(unknown)
        raise UsageError(f"{checkpoint.location}: not a Stable Diffusion checkpoint frame knows "
                         f"({len(unknown)} unknown keys: {found})")
    return parts


def family(location: str, parts: dict[str, list[str]]) -> str:
    if XL_REFINER in parts:
        raise UsageError(f"{location}: an SDXL refiner (only an OpenCLIP bigG text encoder), which frame does not "
                         "paint with; import an SDXL base model")
    if XL_BIGG in parts and XL_CLIP_L in parts:
        return SDXL
    if CLIP_L in parts:
        return SD1
    if OPEN_CLIP_H in parts:
        return SD2
    found = ", ".join(sorted(p.rstrip(".") for p in parts)) or "no tensors"
    raise UsageError(f"{location}: a UNet without the text encoder(s) it needs (found {found}); frame imports "
                     "full checkpoints (UNet, text encoder(s), VAE)")


def _strip(keys: list[str], prefix: str) -> list[str]:
    return [k[len(prefix):] for k in keys]


def _ema_key(key: str) -> str:
    """The EMA copy's key of a UNet key, as LDM's LitEma names it (``model.`` dropped, dots removed)."""
    return EMA + key[len("model."):].replace(".", "")


def unet_takes(checkpoint: Checkpoint, keys: list[str], use_ema: bool) -> dict[str, Take]:
    try:
        _, names = unet_names(_strip(keys, UNET))
    except (UnknownKeys, ValueError) as exc:
        raise UsageError(f"{checkpoint.location}: {exc}") from None
    takes, missing = {}, []
    for inner, name in names.items():
        source = UNET + inner
        if use_ema:
            source = _ema_key(source)
            if source not in checkpoint.tensors:
                missing.append(source)
        takes[name] = Take(source)
    if missing:
        raise UsageError(f"{checkpoint.location}: --ema, but {len(missing)} UNet weights have no EMA copy "
                         f"(such as {missing[0]})")
    return takes


def vae_takes(checkpoint: Checkpoint, keys: list[str], prefix: str) -> dict[str, Take]:
    inner = [k for k in _strip(keys, prefix) if not k.startswith("loss.")]  # a VAE's training discriminator
    try:
        names = vae_names(inner)
    except UnknownKeys as exc:
        raise UsageError(f"{checkpoint.location}: {exc}") from None
    takes = {}
    for key, (name, _) in names.items():
        source = prefix + key
        squeeze = ".attentions.0.to_" in name and name.endswith(".weight") and len(checkpoint.tensors[source].shape) > 2
        takes[name] = Take(source, squeeze=squeeze)
    return takes


def text_takes(checkpoint: Checkpoint, parts: dict[str, list[str]],
               family: str) -> list[tuple[str, dict, list[str], bool]]:
    """(component name, takes, skipped keys, is OpenCLIP) per text encoder."""
    try:
        if family == SD1:
            takes, skipped = clip_names(parts[CLIP_L], CLIP_L)
            return [("text_encoder", takes, skipped, False)]
        if family == SD2:
            shapes = {k: checkpoint.tensors[k].shape for k in parts[OPEN_CLIP_H]}
            takes, skipped = open_clip_names(shapes, OPEN_CLIP_H, drop_last_layer=True, projection=False)
            return [("text_encoder", takes, skipped, True)]
        first, skipped_first = clip_names(parts[XL_CLIP_L], XL_CLIP_L)
        shapes = {k: checkpoint.tensors[k].shape for k in parts[XL_BIGG]}
        second, skipped_second = open_clip_names(shapes, XL_BIGG, drop_last_layer=False, projection=True)
    except UnknownKeys as exc:
        raise UsageError(f"{checkpoint.location}: {exc}") from None
    if "text_projection.weight" not in second:
        raise UsageError(f"{checkpoint.location}: SDXL's second text encoder has no text_projection")
    return [("text_encoder", first, skipped_first, False), ("text_encoder_2", second, skipped_second, True)]


