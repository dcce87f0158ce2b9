"""Export a diffusers Stable Diffusion (1.5 or XL) pipeline to the folder layout optimum writes.

``optimum-cli export onnx --model <sd> out/`` (optimum/exporters/onnx/__main__.py) saves:
``model_index.json`` (``pipeline.save_config``), ``scheduler/scheduler_config.json``,
``tokenizer[_2]/``, and per component ``<name>/model.onnx`` plus ``<name>/config.json`` (the
component's own config: CLIPTextConfig for text encoders, the UNet config, and the AutoencoderKL
config for both vae_encoder and vae_decoder). This module reproduces that with torch's TorchScript
exporter at optimum's default opset 14 and optimum's input/output names and dynamic axes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import clip_vocab
import numpy as np
import onnx
import onnx_export as ox
import tiny_models as tm
import torch

OPSET = 14
UNET_AXES = {
    "sample": {0: "batch_size", 2: "height", 3: "width"},
    "timestep": {0: "steps"},
    "encoder_hidden_states": {0: "batch_size", 1: "sequence_length"},
    "text_embeds": {0: "batch_size"},
    "time_ids": {0: "batch_size"},
    "out_sample": {0: "batch_size", 2: "height", 3: "width"},
}


@dataclass
class ExportReport:
    """What was written and how well onnxruntime matched torch, per component."""

    files: list[Path] = field(default_factory=list)
    errors: dict[str, dict] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f"  {name}: worst rel L2 {max(e['rel_l2'] for e in errs.values()):.2e}"
                 for name, errs in self.errors.items()]
        return "\n".join(lines)


def _export_and_check(report, name, module, out, feeds, outputs, axes, external=False, fp16_min=None):
    """Trace, optionally fp16-store big weights, save, and compare onnxruntime with torch."""
    if fp16_min is not None:
        _round_large_params(module, fp16_min)
    ref = ox.run_torch(module, feeds, outputs)
    args = tuple(torch.from_numpy(np.array(a, copy=True)) for a in feeds.values())
    model = ox.export_torchscript(module, args, list(feeds), outputs, OPSET,
                                  {k: v for k, v in axes.items() if k in [*feeds, *outputs]})
    if fp16_min is not None:
        model = ox.to_fp16_weights(model, min_elements=fp16_min)
    report.files += ox.save(model, out / name, external)
    report.errors[name] = ox.max_errors(ox.run_ort(out / name / "model.onnx", feeds), ref)


def _round_large_params(module: torch.nn.Module, min_elements: int) -> None:
    """Round only the parameters that will be stored as fp16, so torch and ONNX hold the same values."""
    with torch.no_grad():
        for param in module.parameters():
            if param.numel() >= min_elements:
                param.copy_(param.half().float())


def _write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def export_text_encoder(report, pipe, name, out, hidden_states, fp16_min):
    """text_encoder[_2]: int32 input_ids (optimum casts to int32) -> optimum's output names."""
    model = getattr(pipe, name)
    wrapper = tm.ClipTextWrapper(model, hidden_states)
    outputs = wrapper.output_names()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, model.config.vocab_size - 2, (2, 77)).astype(np.int32)
    ids[:, 0], ids[:, 20:] = model.config.vocab_size - 2, model.config.vocab_size - 1
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"}}
    axes.update({o: {0: "batch_size"} if o in ("pooler_output", "text_embeds")
                 else {0: "batch_size", 1: "sequence_length"} for o in outputs})
    _export_and_check(report, name, wrapper, out, {"input_ids": ids}, outputs, axes, fp16_min=fp16_min)
    model.config.save_pretrained(str(out / name))
    report.files.append(out / name / "config.json")


def export_unet(report, pipe, out, external):
    """unet: sample, timestep float32 [steps] (optimum 1.x), encoder_hidden_states (+ SDXL extras)."""
    unet = pipe.unet
    cfg = unet.config
    text_time = cfg.addition_embed_type == "text_time"
    rng = np.random.default_rng(0)
    feeds = {
        "sample": rng.standard_normal((2, cfg.in_channels, 8, 12)).astype(np.float32),
        "timestep": np.array([501.0], dtype=np.float32),
        "encoder_hidden_states": rng.standard_normal((2, 77, cfg.cross_attention_dim)).astype(np.float32),
    }
    if text_time:
        pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
        feeds["text_embeds"] = rng.standard_normal((2, pooled)).astype(np.float32)
        feeds["time_ids"] = np.tile(np.array([64, 96, 0, 0, 64, 96], np.float32), (2, 1))
    wrapper = tm.UNetWrapper(unet, text_time)
    _export_and_check(report, "unet", wrapper, out, feeds, ["out_sample"], UNET_AXES, external=external)
    unet.save_config(str(out / "unet"))
    report.files.append(out / "unet" / "config.json")


def export_vae(report, pipe, out, encoder_style):
    """vae_decoder (latent_sample -> sample) and, unless ``encoder_style`` is None, vae_encoder."""
    vae = pipe.vae
    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, vae.config.latent_channels, 6, 10)).astype(np.float32)
    _export_and_check(report, "vae_decoder", tm.VaeDecoderWrapper(vae), out, {"latent_sample": z},
                      ["sample"], VAE_AXES)
    vae.save_config(str(out / "vae_decoder"))
    report.files.append(out / "vae_decoder" / "config.json")
    if encoder_style is not None:
        export_vae_encoder(report, vae, out, encoder_style)


VAE_AXES = {"latent_sample": {0: "batch_size", 2: "height_latent", 3: "width_latent"},
            "latent_parameters": {0: "batch_size", 2: "height_latent", 3: "width_latent"},
            "sample": {0: "batch_size", 2: "height", 3: "width"}}


def export_vae_encoder(report, vae, out, style: str, opset: int = OPSET, size: tuple[int, int] = (48, 80)):
    """vae_encoder/model.onnx (+ config.json) in one of the exporters' styles (tm.VAE_ENCODER_STYLES).

    A "sampled" graph draws its own noise, so onnxruntime cannot equal torch; it is checked with its
    RandomNormalLike replaced by an input fed a known draw, against torch's ``mean + std * draw``.
    """
    output = tm.VAE_ENCODER_STYLES[style]
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, *size)).astype(np.float32)
    wrapper = tm.VaeEncoderWrapper(vae, style)
    if style != "sampled":
        _export_and_check(report, "vae_encoder", wrapper, out, {"sample": x}, [output], VAE_AXES)
    else:
        args = (torch.from_numpy(x),)
        model = ox.export_torchscript(wrapper, args, ["sample"], [output], opset, VAE_AXES)
        randoms = [n for n in model.graph.node if n.op_type == "RandomNormalLike"]
        assert len(randoms) == 1, "a traced latent_dist.sample() has one RandomNormalLike"
        report.files += ox.save(model, out / "vae_encoder", False)
        fed, noise_name = ox.random_as_input(model)
        eps = np.random.default_rng(2).standard_normal((1, vae.config.latent_channels, size[0] // 8,
                                                        size[1] // 8)).astype(np.float32)
        with torch.no_grad():
            dist = vae.encode(torch.from_numpy(x), return_dict=False)[0]
            ref = {output: (dist.mean + dist.std * torch.from_numpy(eps)).numpy()}
        path = out / "vae_encoder" / "_fed_noise_check.onnx"
        onnx.save(fed, str(path))
        try:
            report.errors["vae_encoder"] = ox.max_errors(ox.run_ort(path, {"sample": x, noise_name: eps}), ref)
        finally:
            path.unlink()
    vae.save_config(str(out / "vae_encoder"))
    report.files.append(out / "vae_encoder" / "config.json")


def write_scheduler(pipe, out: Path, extra: dict | None) -> Path:
    """scheduler/scheduler_config.json as diffusers saves it, plus keys the class does not take.

    Real SD 1.5 / SDXL files carry keys such as ``clip_sample: false`` that PNDM/Euler ignore but
    that matter when another scheduler is built ``from_config`` (DDIM defaults to clip_sample=True).
    """
    pipe.scheduler.save_pretrained(str(out / "scheduler"))
    path = out / "scheduler" / "scheduler_config.json"
    data = json.loads(path.read_text())
    data.update(extra or {})
    return _write_json(path, data)


def export_pipeline(pipe, out: Path, tokenizers: dict[str, tuple[dict, list[str], str]],
                    fp16_min: int | None = None, unet_external: bool = False,
                    vae_encoder: str | None = "sampled", scheduler_extra: dict | None = None) -> ExportReport:
    """Write the whole folder. ``tokenizers`` maps subfolder -> (vocab, merges, pad_token);
    ``vae_encoder``: its export style (tiny_models.VAE_ENCODER_STYLES) or None for none."""
    out.mkdir(parents=True, exist_ok=True)
    report = ExportReport()
    pipe.save_config(str(out))
    report.files.append(out / "model_index.json")
    report.files.append(write_scheduler(pipe, out, scheduler_extra))
    for sub, (vocab, merges, pad) in tokenizers.items():
        report.files += clip_vocab.write_tokenizer(out / sub, vocab, merges, pad)
    sdxl = getattr(pipe, "text_encoder_2", None) is not None
    for name in ("text_encoder", "text_encoder_2"):
        if getattr(pipe, name, None) is not None:
            export_text_encoder(report, pipe, name, out, hidden_states=sdxl, fp16_min=fp16_min)
    export_unet(report, pipe, out, unet_external)
    export_vae(report, pipe, out, vae_encoder)
    return report


def folder_size(folder: Path) -> int:
    """Total bytes of the files below ``folder``."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
