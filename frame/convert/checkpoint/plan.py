"""``detect``: from an opened checkpoint to what it is and its components, ready to stream.

Steps 1 and 2 of the decision (refusing LoRAs and embeddings, sorting keys by prefix) are in
``frame.convert.checkpoint.detect``; here are steps 3 and 4 (the UNet's inputs and width, prediction
type, size and Turbo) and the components' configs (``frame.convert.checkpoint.configs``). A diffusers
folder skips the key sorting: its folders name the components and its config.json files are
authoritative (checked against the shapes all the same).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from frame.convert.checkpoint import configs
from frame.convert.checkpoint import detect as keys
from frame.convert.checkpoint.components import Component, Take
from frame.convert.checkpoint.configs import SD1, SD2, SDXL
from frame.convert.checkpoint.reader import Checkpoint, Opener, json_object
from frame.convert.checkpoint.text_keys import CLIP_PART, CLIP_SKIPPED
from frame.convert.checkpoint.vae_keys import diffusers_name
from frame.errors import UsageError

VAE_FILE = "vae"
LABELS = {SD1: "SD 1.x (CLIP ViT-L text encoder, context 768)",
          SD2: "SD 2.x (OpenCLIP ViT-H text encoder, context 1024, linear projections)",
          SDXL: "SDXL (CLIP ViT-L + OpenCLIP bigG with projection, text_time conditioning)",
          VAE_FILE: "a standalone VAE"}
PREDICTIONS = {"epsilon": "epsilon", "eps": "epsilon", "v": "v_prediction", "v_prediction": "v_prediction",
               "v-prediction": "v_prediction"}
SUPPORTED_INPUTS = 4
OTHER_INPUTS = {9: "an inpainting model", 8: "an instruct-pix2pix model"}


@dataclass(frozen=True)
class Options:
    prediction: str | None = None  # --prediction: epsilon | v
    use_ema: bool = False  # --ema: the UNet's EMA copy instead of its weights
    name: str = ""  # the file or folder name, for "turbo"
    config_dir: str | None = None  # --config-from: a diffusers folder whose config.json files to use
    vae: Checkpoint | None = None  # --vae: replaces the checkpoint's VAE


@dataclass(frozen=True)
class Detected:
    """What was found, and the components ready to stream."""

    family: str  # sd1, sd2, sdxl, or "vae" for a standalone VAE file
    prediction: str  # epsilon | v_prediction
    resolution: int  # native pixels per side
    turbo: bool
    components: tuple[Component, ...]
    notes: tuple[str, ...]
    zero_snr: bool = False  # trained with zero terminal SNR (the file's ztsnr key): the schedule is rescaled

    @property
    def label(self) -> str:
        if self.family == VAE_FILE:
            return LABELS[VAE_FILE]
        kind = "v-prediction" if self.prediction == "v_prediction" else "epsilon prediction"
        return f"{LABELS[self.family]}{', Turbo' if self.turbo else ''}, {kind}, {self.resolution} px"

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)


def _config_override(options: Options, name: str) -> tuple[dict | None, str]:
    if options.config_dir is None:
        return None, ""
    path = os.path.join(options.config_dir, name, "config.json")
    return json_object(Opener(), path, path), path


def _component(name: str, derived: dict, takes: dict[str, Take], source: Checkpoint, options: Options,
               skipped=(), given: dict | None = None, where: str = "") -> Component:
    if given is None:
        given, where = _config_override(options, name)
    return Component(name, configs.overridden(name, derived, given, where), takes, source, tuple(skipped))


def _said_prediction(checkpoint: Checkpoint) -> tuple[str | None, str]:
    meta = {k.lower(): v for k, v in checkpoint.metadata.items()}
    if "v_pred" in checkpoint.tensors:
        return "v_prediction", "its v_pred key"
    if (value := meta.get("modelspec.prediction_type")) is not None:
        if value.lower() in PREDICTIONS:
            return PREDICTIONS[value.lower()], "its modelspec.prediction_type"
    arch = meta.get("modelspec.architecture", "").lower()
    if arch.endswith("-v") or "v-prediction" in arch:
        return "v_prediction", "its modelspec.architecture"
    return None, ""


def _prediction(checkpoint: Checkpoint, family: str, asked: str | None, turbo: bool) -> tuple[str, str]:
    said, why = _said_prediction(checkpoint)
    asked = PREDICTIONS[asked] if asked else None
    if said and asked and said != asked:
        raise UsageError(f"{checkpoint.location}: --prediction says {asked}, but the file says {said} ({why}); "
                         "leave --prediction out")
    if said:
        return said, f"prediction type from {why}"
    if asked:
        return asked, "prediction type from --prediction"
    if family == SD2 and not turbo:
        return "v_prediction", ("SD 2.x file without a prediction type: v-prediction at 768 px (SD 2.0/2.1 768); "
                                "for SD 2.x 512-base give --prediction epsilon")
    return "epsilon", ""


def _resolution(checkpoint: Checkpoint, family: str, prediction: str, turbo: bool) -> int:
    said = checkpoint.metadata.get("modelspec.resolution", "")
    if match := re.fullmatch(r"\s*(\d{3,4})\s*x\s*(\d{3,4})\s*", said):
        return int(match.group(1))
    if family == SDXL:
        return 512 if turbo else 1024
    if family == SD2:
        return 768 if prediction == "v_prediction" else 512
    return 512


def _is_turbo(checkpoint: Checkpoint, name: str) -> bool:
    text = " ".join([name, checkpoint.metadata.get("modelspec.title", ""),
                     checkpoint.metadata.get("modelspec.architecture", "")])
    return "turbo" in text.lower()


def _vae_component(checkpoint: Checkpoint, parts: dict[str, list[str]], family: str, resolution: int,
                   options: Options) -> tuple[Component, list[str]]:
    notes = []
    if options.vae is not None:
        takes, source = detect_vae(options.vae).takes, options.vae
        if keys.VAE in parts:
            notes.append(f"VAE from {options.vae.location} (the checkpoint's own is not used)")
    elif keys.VAE in parts:
        takes, source = keys.vae_takes(checkpoint, parts[keys.VAE], keys.VAE), checkpoint
    else:
        raise UsageError(f"{checkpoint.location}: no VAE in it (no first_stage_model.* keys); give one with "
                         "--vae FILE")
    shapes = {k: t.shape(source.tensors[t.source].shape) for k, t in takes.items()}
    derived = configs.vae_config(shapes, family, resolution)
    return _component("vae", derived, takes, source, options), notes


def detect_vae(checkpoint: Checkpoint) -> Component:
    """A standalone VAE file (original or diffusers names) as a ``vae`` component (SD 1.x defaults)."""
    keys.refuse_non_checkpoints(checkpoint)
    parts = keys.split(checkpoint)
    if set(parts) - {"vae-file", keys.VAE}:
        found = ", ".join(sorted(p.rstrip(".") for p in parts))
        raise UsageError(f"{checkpoint.location}: not a VAE file (it holds {found})")
    prefix = keys.VAE if keys.VAE in parts else ""
    takes = keys.vae_takes(checkpoint, parts.get(keys.VAE, parts.get("vae-file", [])), prefix)
    shapes = {k: t.shape(checkpoint.tensors[t.source].shape) for k, t in takes.items()}
    return Component("vae", configs.vae_config(shapes, SD1, 512), takes, checkpoint)


def detect(checkpoint: Checkpoint, options: Options | None = None) -> Detected:
    """What ``checkpoint`` is and its components; one UsageError line for anything frame cannot import."""
    options = options or Options()
    if checkpoint.configs:
        return detect_folder(checkpoint, options)
    keys.refuse_non_checkpoints(checkpoint)
    parts = keys.split(checkpoint)
    if keys.UNET not in parts:
        if set(parts) <= {"vae-file", keys.VAE}:
            return Detected(VAE_FILE, "epsilon", 512, False, (detect_vae(checkpoint),), ())
        found = ", ".join(sorted(p.rstrip(".") for p in parts)) or "no tensors"
        raise UsageError(f"{checkpoint.location}: no UNet (model.diffusion_model.*) in it; found {found}")
    family = keys.family(checkpoint.location, parts)
    notes = []
    ema_count = len(parts.get(keys.EMA, []))
    if ema_count > 100 and not options.use_ema:
        notes.append(f"the file also holds {ema_count} EMA weights; the regular ones are used (--ema for the EMA ones)")
    unet_takes = keys.unet_takes(checkpoint, parts[keys.UNET], options.use_ema)
    unet_shapes = {k: t.shape(checkpoint.tensors[t.source].shape) for k, t in unet_takes.items()}
    inputs = unet_shapes["conv_in.weight"][1]
    if inputs != SUPPORTED_INPUTS:
        what = OTHER_INPUTS.get(inputs, f"a UNet with {inputs} input channels")
        raise UsageError(f"{checkpoint.location}: {what} ({inputs} input channels); frame paints with "
                         f"{SUPPORTED_INPUTS}-channel text-to-image UNets")
    turbo = _is_turbo(checkpoint, options.name)
    prediction, why = _prediction(checkpoint, family, options.prediction, turbo)
    if why:
        notes.append(why)
    resolution = _resolution(checkpoint, family, prediction, turbo)
    components = []
    widths = []
    for name, takes, skipped, open_clip in keys.text_takes(checkpoint, parts, family):
        shapes = {k: t.shape(checkpoint.tensors[t.source].shape) for k, t in takes.items()}
        component = _component(name, configs.text_config(shapes, open_clip), takes, checkpoint, options, skipped)
        widths.append(component.config["hidden_size"])
        components.append(component)
    pooled = components[-1].config["projection_dim"] if family == SDXL else None
    unet_config = configs.unet_config(unet_shapes, family, resolution // 8, pooled)
    if family == SD2 and prediction == "v_prediction" and resolution >= 768:
        unet_config["upcast_attention"] = True  # as stabilityai/stable-diffusion-2-1's unet/config.json
    if unet_config["cross_attention_dim"] != sum(widths):
        raise UsageError(f"{checkpoint.location}: the UNet attends to width {unet_config['cross_attention_dim']}, but "
                         f"the text encoder(s) give {' + '.join(map(str, widths))}")
    unet = _component("unet", unet_config, unet_takes, checkpoint, options)
    vae, vae_notes = _vae_component(checkpoint, parts, family, resolution, options)
    zero_snr = "ztsnr" in checkpoint.tensors
    if zero_snr:
        notes.append("zero terminal SNR (its ztsnr key): the noise schedule is rescaled, with trailing timesteps")
    return Detected(family, prediction, resolution, turbo, (unet, vae, *components), tuple(notes + vae_notes),
                    zero_snr)


def _folder_takes(checkpoint: Checkpoint, component: str) -> tuple[dict[str, Take], list[str]]:
    """A diffusers folder's own names, normalised: old VAE attention names, CLIP without ``text_model.``."""
    prefix = component + "/"
    takes, skipped, unknown = {}, [], []
    for key in checkpoint.tensors:
        if not key.startswith(prefix):
            continue
        inner = key[len(prefix):]
        if component == "vae":
            name = diffusers_name(inner)
            if name is None:
                unknown.append(inner)
                continue
            squeeze = ".attentions.0.to_" in name[0] and len(checkpoint.tensors[key].shape) > 2
            takes[name[0]] = Take(key, squeeze=squeeze)
        elif component.startswith("text_encoder"):
            bare = inner[len("text_model."):] if inner.startswith("text_model.") else inner
            if bare in CLIP_SKIPPED:
                skipped.append(key)
            elif CLIP_PART.fullmatch(bare):
                takes[f"text_model.{bare}"] = Take(key)
            elif inner == "text_projection.weight":
                takes[inner] = Take(key)
            else:
                unknown.append(inner)
        else:
            takes[inner] = Take(key)
    if unknown:
        raise UsageError(f"{checkpoint.location}: {len(unknown)} {component} key(s) frame does not know, such as "
                         f"{unknown[0]}")
    return takes, skipped


def detect_folder(checkpoint: Checkpoint, options: Options) -> Detected:
    """A diffusers folder: components by folder, configs from its config.json files."""
    given = checkpoint.configs
    for needed in ("unet", "vae", "text_encoder"):
        if needed not in given:
            raise UsageError(f"{checkpoint.location}: no {needed}/ with safetensors weights")
    family = SDXL if "text_encoder_2" in given else SD2 if given["text_encoder"].get("hidden_act") == "gelu" else SD1
    scheduler = given.get("scheduler", {})
    turbo = "turbo" in options.name.lower() or scheduler.get("timestep_spacing") == "trailing"
    said = scheduler.get("prediction_type")
    prediction = said if said in ("epsilon", "v_prediction") else "epsilon"
    if options.prediction and PREDICTIONS[options.prediction] != prediction and said:
        raise UsageError(f"{checkpoint.location}: --prediction says {PREDICTIONS[options.prediction]}, but its "
                         f"scheduler_config.json says {said}; leave --prediction out")
    if options.prediction:
        prediction = PREDICTIONS[options.prediction]
    resolution = int(given["unet"].get("sample_size", 64)) * 8
    components = []
    for name in ("unet", "vae", "text_encoder", "text_encoder_2"):
        if name not in given:
            continue
        takes, skipped = _folder_takes(checkpoint, name)
        shapes = {k: t.shape(checkpoint.tensors[t.source].shape) for k, t in takes.items()}
        if name == "unet":
            pooled = given.get("text_encoder_2", {}).get("projection_dim")
            derived = configs.unet_config(shapes, family, resolution // 8, pooled)
        elif name == "vae":
            derived = configs.vae_config(shapes, family, resolution)
        else:
            derived = configs.text_config(shapes, open_clip=given[name].get("hidden_act") == "gelu")
        where = f"{checkpoint.location}/{name}/config.json"
        override, override_where = _config_override(options, name)
        components.append(_component(name, derived, takes, checkpoint, options, skipped, override or given[name],
                                     override_where if override else where))
    if options.vae is not None:
        vae = detect_vae(options.vae)
        components = [c if c.name != "vae" else Component("vae", c.config, vae.takes, options.vae)
                      for c in components]
    return Detected(family, prediction, resolution, turbo, tuple(components),
                    ("configs from the folder's config.json files",))
