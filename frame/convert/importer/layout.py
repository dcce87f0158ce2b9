"""The small files of an imported model folder: model_index.json, the scheduler, the tokenizers and each
component's config.json, in the layout ``optimum-cli export onnx`` writes and frame already runs.

The scheduler is the one the model family was published with (SD 1.x: PNDM; SD 2.x: DDIM with its
prediction type; SDXL: Euler; Turbo: Euler ancestral with trailing spacing, which frame reads as a
few-step model), with the detected prediction type. The tokenizer is the CLIP BPE vocabulary frame
ships (``frame/models/demo/tokenizer``, 49408 tokens, the same for CLIP ViT-L and OpenCLIP), with
``!`` as the padding token where the OpenCLIP encoders were trained with it (SD 2.x, SDXL's second);
a ``--config-from`` folder's own tokenizer folders replace it (the tiny test models' vocabularies).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from frame.convert.checkpoint.configs import SD1, SD2, SDXL
from frame.convert.checkpoint.plan import Detected
from frame.models import demo_model_path

DIFFUSERS_VERSION = "0.42.1"
_BETAS = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "num_train_timesteps": 1000,
          "steps_offset": 1, "clip_sample": False, "set_alpha_to_one": False, "trained_betas": None}
SCHEDULERS = {
    SD1: {"_class_name": "PNDMScheduler", **_BETAS, "skip_prk_steps": True, "timestep_spacing": "leading"},
    SD2: {"_class_name": "DDIMScheduler", **_BETAS, "skip_prk_steps": True, "timestep_spacing": "leading"},
    SDXL: {"_class_name": "EulerDiscreteScheduler", **_BETAS, "interpolation_type": "linear",
           "timestep_spacing": "leading", "use_karras_sigmas": False, "skip_prk_steps": True, "sample_max_value": 1.0},
    "turbo": {"_class_name": "EulerAncestralDiscreteScheduler", **_BETAS, "interpolation_type": "linear",
              "timestep_spacing": "trailing", "use_karras_sigmas": False, "skip_prk_steps": True,
              "sample_max_value": 1.0},
}
# The ONNX folders each checkpoint component becomes.
GRAPHS = {"unet": ("unet",), "vae": ("vae_decoder", "vae_encoder"), "text_encoder": ("text_encoder",),
          "text_encoder_2": ("text_encoder_2",)}
PAD = {"tokenizer": {SD1: "<|endoftext|>", SD2: "!", SDXL: "<|endoftext|>"}, "tokenizer_2": {SDXL: "!"}}
TEXT_CLASSES = {"text_encoder": "CLIPTextModel", "text_encoder_2": "CLIPTextModelWithProjection"}


def scheduler_config(found: Detected, given: dict | None = None) -> dict:
    """The scheduler: ``given`` (a diffusers folder's own) if there is one, else the family's."""
    if given is not None:
        return {**given, "prediction_type": found.prediction}
    base = SCHEDULERS["turbo" if found.turbo else found.family]
    config = {**base, "_diffusers_version": DIFFUSERS_VERSION, "prediction_type": found.prediction}
    if found.zero_snr:  # diffusers' advice for zero-SNR models (Lin et al. 2023, section 3.3): trailing spacing
        config.update(rescale_betas_zero_snr=True, timestep_spacing="trailing")
    return config


def model_index(found: Detected, name: str) -> dict:
    sdxl = found.family == SDXL
    index: dict = {"_class_name": "StableDiffusionXLPipeline" if sdxl else "StableDiffusionPipeline",
                   "_diffusers_version": DIFFUSERS_VERSION, "_name_or_path": name,
                   "feature_extractor": [None, None], "image_encoder": [None, None],
                   "scheduler": ["diffusers", scheduler_config(found)["_class_name"]],
                   "text_encoder": ["transformers", "CLIPTextModel"], "tokenizer": ["transformers", "CLIPTokenizer"],
                   "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"]}
    if sdxl:
        index.update(force_zeros_for_empty_prompt=True, text_encoder_2=["transformers", "CLIPTextModelWithProjection"],
                     tokenizer_2=["transformers", "CLIPTokenizer"])
    else:
        index.update(requires_safety_checker=False, safety_checker=[None, None])
    return index


def write_json(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_tokenizers(found: Detected, folder: Path, config_dir: str | None) -> None:
    """tokenizer/ (and tokenizer_2/ for SDXL): a --config-from folder's own, else frame's CLIP vocabulary."""
    names = ("tokenizer", "tokenizer_2") if found.family == SDXL else ("tokenizer",)
    for name in names:
        target = folder / name
        shutil.rmtree(target, ignore_errors=True)  # a resumed import writes them again
        own = Path(config_dir) / name if config_dir else None
        if own is not None and (own / "vocab.json").is_file() and (own / "merges.txt").is_file():
            shutil.copytree(own, target)
            continue
        source = demo_model_path() / "tokenizer"
        target.mkdir(parents=True)
        for file in ("vocab.json", "merges.txt"):
            shutil.copyfile(source / file, target / file)
        pad = PAD[name][found.family]
        config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
        special = json.loads((source / "special_tokens_map.json").read_text(encoding="utf-8"))
        write_json(target / "tokenizer_config.json", {**config, "pad_token": pad})
        write_json(target / "special_tokens_map.json", {**special, "pad_token": pad})


def write_small_files(found: Detected, folder: Path, name: str, config_dir: str | None,
                      scheduler: dict | None = None) -> None:
    """Everything but the graphs: model_index.json, scheduler, tokenizers, each graph's config.json."""
    write_json(folder / "model_index.json", model_index(found, name))
    write_json(folder / "scheduler" / "scheduler_config.json", scheduler_config(found, scheduler))
    write_tokenizers(found, folder, config_dir)
    for component in found.components:
        for graph in GRAPHS[component.name]:
            config = dict(component.config)
            if component.name in TEXT_CLASSES:
                config["architectures"] = [TEXT_CLASSES[component.name]]
            write_json(folder / graph / "config.json", config)
