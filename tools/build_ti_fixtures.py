"""Textual-inversion fixtures: embedding files in A1111's layouts and diffusers' pictures with them.

Dev-only (torch, transformers, diffusers, safetensors, onnxruntime). For the tiny SD 1.5 pipeline of
``tests/fixtures/pipelines/sd15`` it writes ``tests/fixtures/textual_inversion/sd15/``:

* ``embeddings/inkwash.pt``: A1111's own training output (``string_to_param {"*": (2, 32)}``,
  ``string_to_token``, ``name``, ``step``), saved with ``torch.save``;
* ``embeddings/badhands.safetensors``: one ``emb_params`` tensor (1, 32), the usual negative embedding;
* ``reference.npz``: diffusers' prompt embeddings after ``load_textual_inversion`` of both files
  (``maybe_convert_prompt`` expanding the multi-vector token), and the picture they paint: the
  torch text encoder rebuilt from the fixture's seed (checked equal to the export's token table),
  diffusers' Euler scheduler and ``randn_tensor`` latent from ``torch.Generator().manual_seed(seed)``,
  the UNet and VAE run by onnxruntime from the export, as in ``tools/build_noise_fixtures.py``.

For the tiny SDXL pipeline, ``tests/fixtures/textual_inversion/sdxl/``: ``embeddings/xlstyle.safetensors``
(``clip_l`` (2, 16) and ``clip_g`` (2, 24)), loaded into diffusers' two text encoders as its docs show
(``text_encoder``/``tokenizer`` and ``text_encoder_2``/``tokenizer_2``), and ``reference.npz`` as above
(prompt embeddings: both encoders' penultimate states; ``pooled``: ``text_embeds``).

    /work/main/.venv/bin/python tools/build_ti_fixtures.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_pipeline_fixtures as bpf  # noqa: E402
import onnx_export as ox  # noqa: E402
import onnx_reference_pipeline as orp  # noqa: E402
import pipeline_cases as pc  # noqa: E402
import tiny_models as tm  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "tests" / "fixtures" / "pipelines" / "sd15" / "model"
OUT = REPO / "tests" / "fixtures" / "textual_inversion" / "sd15"
SPEC = dict(prompt="a lighthouse on a cliff at dusk, inkwash, oil painting", negative_prompt="badhands, blurry",
            steps=6, guidance=7.5, width=96, height=64, seed=4321, sampler="euler")


def text_encoder():
    """The fixture's SD 1.5 text encoder in torch (same seed and config as build_pipeline_fixtures)."""
    vocab = json.loads((MODEL / "tokenizer" / "vocab.json").read_text())
    model = tm.clip_text(bpf.SEED + 2, bpf._text_config(bpf.TEXT_SD15, len(vocab), len(vocab) - 1))
    proto = onnx.load(str(MODEL / "text_encoder" / "model.onnx"))
    table = next(numpy_helper.to_array(t) for t in proto.graph.initializer if t.name.endswith("token_embedding.weight"))
    if not np.array_equal(table, model.get_input_embeddings().weight.detach().numpy()):
        raise SystemExit("the rebuilt text encoder is not the exported one")
    return model, table


def write_embeddings(folder: Path, table: np.ndarray) -> None:
    from safetensors.torch import save_file

    rng = np.random.default_rng(2024)
    scale = float(table.std()) * 3  # distinctive: a learned vector sits well off the vocabulary's rows
    ink = torch.from_numpy(rng.normal(0, scale, (2, table.shape[1])).astype(np.float32))
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": ink.requires_grad_(True)},
                "name": "inkwash", "step": 500, "sd_checkpoint": "0123abcd", "sd_checkpoint_name": "tiny"},
               folder / "inkwash.pt")
    bad = torch.from_numpy(rng.normal(0, scale, (1, table.shape[1])).astype(np.float32))
    save_file({"emb_params": bad}, str(folder / "badhands.safetensors"))


def diffusers_embeds(folder: Path, model) -> tuple[np.ndarray, np.ndarray]:
    from diffusers.loaders import TextualInversionLoaderMixin
    from transformers import CLIPTokenizer

    class Loader(TextualInversionLoaderMixin):
        hf_device_map = None

        def __init__(self, tokenizer, text_encoder):
            self.tokenizer, self.text_encoder = tokenizer, text_encoder
            self.components = {"tokenizer": tokenizer, "text_encoder": text_encoder}

    tokenizer = CLIPTokenizer.from_pretrained(str(MODEL / "tokenizer"))
    loader = Loader(tokenizer, model)
    loader.load_textual_inversion(str(folder / "inkwash.pt"), token="inkwash")
    loader.load_textual_inversion(str(folder / "badhands.safetensors"), token="badhands")
    out = []
    for text in (SPEC["prompt"], SPEC["negative_prompt"]):
        converted = loader.maybe_convert_prompt(text, tokenizer)
        ids = tokenizer(converted, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
        with torch.no_grad():
            out.append(model(ids)[0].numpy())
    return out[0], out[1]


def render(cond: np.ndarray, uncond: np.ndarray) -> np.ndarray:
    from diffusers.utils.torch_utils import randn_tensor

    case = pc.Case("ti", SPEC["sampler"], SPEC["prompt"], SPEC["negative_prompt"], SPEC["steps"], SPEC["guidance"],
                   SPEC["width"], SPEC["height"], "")
    scheduler = pc.make_scheduler(case, json.loads((MODEL / "scheduler" / "scheduler_config.json").read_text()))
    scheduler.set_timesteps(case.steps)
    generator = torch.Generator().manual_seed(SPEC["seed"])
    latents = randn_tensor((1, 4, case.height // 8, case.width // 8), generator=generator,
                           device=torch.device("cpu"), dtype=torch.float32) * scheduler.init_noise_sigma
    context = np.concatenate([uncond, cond]).astype(np.float32)
    for t in scheduler.timesteps:
        x = scheduler.scale_model_input(torch.cat([latents] * 2), t)
        eps = ox.run_ort(MODEL / "unet" / "model.onnx", {"sample": x.numpy().astype(np.float32),
                                                         "timestep": np.array([float(t)], np.float32),
                                                         "encoder_hidden_states": context})["out_sample"]
        eps = eps[:1] + case.guidance * (eps[1:] - eps[:1])
        latents = scheduler.step(torch.from_numpy(eps), t, latents, generator=generator).prev_sample
    return orp._decode(MODEL, latents)


XL_MODEL = REPO / "tests" / "fixtures" / "pipelines" / "sdxl" / "model"
XL_OUT = REPO / "tests" / "fixtures" / "textual_inversion" / "sdxl"
XL_SPEC = dict(prompt="a lighthouse on a cliff at dusk, xlstyle, oil painting", negative_prompt="blurry",
               steps=5, guidance=6.0, width=96, height=64, seed=99, sampler="euler")


def xl_encoders():
    vocab = json.loads((XL_MODEL / "tokenizer" / "vocab.json").read_text())
    first = tm.clip_text(bpf.SEED + 12, bpf._text_config(bpf.TEXT_SDXL_1, len(vocab), len(vocab) - 1))
    second = tm.clip_text(bpf.SEED + 13, bpf._text_config(bpf.TEXT_SDXL_2, len(vocab), vocab["!"]),
                          with_projection=True)
    for model, sub in ((first, "text_encoder"), (second, "text_encoder_2")):
        proto = onnx.load(str(XL_MODEL / sub / "model.onnx"))
        table = next(numpy_helper.to_array(t) for t in proto.graph.initializer
                     if t.name.endswith("token_embedding.weight"))
        if not np.array_equal(table, model.get_input_embeddings().weight.detach().numpy()):
            raise SystemExit(f"the rebuilt {sub} is not the exported one")
    return first, second


def build_sdxl() -> None:
    from diffusers.loaders import TextualInversionLoaderMixin
    from safetensors.torch import save_file
    from transformers import CLIPTokenizer

    class Loader(TextualInversionLoaderMixin):
        hf_device_map = None

        def __init__(self, tokenizer, text_encoder):
            self.tokenizer, self.text_encoder = tokenizer, text_encoder
            self.components = {"tokenizer": tokenizer, "text_encoder": text_encoder}

    if XL_OUT.exists():
        shutil.rmtree(XL_OUT)
    (XL_OUT / "embeddings").mkdir(parents=True)
    first, second = xl_encoders()
    rng = np.random.default_rng(7)
    tables = {}
    for key, model in (("clip_l", first), ("clip_g", second)):
        weight = model.get_input_embeddings().weight.detach().numpy()
        tables[key] = torch.from_numpy(rng.normal(0, float(weight.std()) * 3, (2, weight.shape[1])).astype(np.float32))
    save_file(tables, str(XL_OUT / "embeddings" / "xlstyle.safetensors"))
    parts = []
    for key, model, sub in (("clip_l", first, "tokenizer"), ("clip_g", second, "tokenizer_2")):
        tokenizer = CLIPTokenizer.from_pretrained(str(XL_MODEL / sub))
        loader = Loader(tokenizer, model)
        loader.load_textual_inversion(tables[key], token="xlstyle")
        encoded = []
        for text in (XL_SPEC["prompt"], XL_SPEC["negative_prompt"]):
            ids = tokenizer(loader.maybe_convert_prompt(text, tokenizer), padding="max_length", max_length=77,
                            truncation=True, return_tensors="pt").input_ids
            with torch.no_grad():
                out = model(ids, output_hidden_states=True)
            encoded.append((out.hidden_states[-2].numpy(), getattr(out, "text_embeds", None)))
        parts.append(encoded)
    cond = np.concatenate([parts[0][0][0], parts[1][0][0]], axis=-1)
    uncond = np.concatenate([parts[0][1][0], parts[1][1][0]], axis=-1)
    pooled, neg_pooled = parts[1][0][1].numpy(), parts[1][1][1].numpy()
    image = xl_render(cond, uncond, pooled, neg_pooled)
    np.savez(XL_OUT / "reference.npz", image=image.astype(np.float32), prompt_embeds=cond, negative_embeds=uncond,
             pooled=pooled, negative_pooled=neg_pooled, settings=np.array(json.dumps(XL_SPEC)))


def xl_render(cond, uncond, pooled, neg_pooled) -> np.ndarray:
    from diffusers.utils.torch_utils import randn_tensor

    spec = XL_SPEC
    case = pc.Case("ti_xl", spec["sampler"], spec["prompt"], spec["negative_prompt"], spec["steps"], spec["guidance"],
                   spec["width"], spec["height"], "")
    scheduler = pc.make_scheduler(case, json.loads((XL_MODEL / "scheduler" / "scheduler_config.json").read_text()))
    scheduler.set_timesteps(case.steps)
    generator = torch.Generator().manual_seed(spec["seed"])
    latents = randn_tensor((1, 4, case.height // 8, case.width // 8), generator=generator,
                           device=torch.device("cpu"), dtype=torch.float32) * scheduler.init_noise_sigma
    time_ids = np.array([[case.height, case.width, 0, 0, case.height, case.width]] * 2, np.float32)
    feeds = {"encoder_hidden_states": np.concatenate([uncond, cond]).astype(np.float32),
             "text_embeds": np.concatenate([neg_pooled, pooled]).astype(np.float32), "time_ids": time_ids}
    for t in scheduler.timesteps:
        x = scheduler.scale_model_input(torch.cat([latents] * 2), t)
        eps = ox.run_ort(XL_MODEL / "unet" / "model.onnx", {"sample": x.numpy().astype(np.float32),
                                                            "timestep": np.array([float(t)], np.float32),
                                                            **feeds})["out_sample"]
        eps = eps[:1] + case.guidance * (eps[1:] - eps[:1])
        latents = scheduler.step(torch.from_numpy(eps), t, latents, generator=generator).prev_sample
    return orp._decode(XL_MODEL, latents)


def main() -> int:
    torch.set_num_threads(1)
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "embeddings").mkdir(parents=True)
    model, table = text_encoder()
    write_embeddings(OUT / "embeddings", table)
    cond, uncond = diffusers_embeds(OUT / "embeddings", model)
    image = render(cond, uncond)
    np.savez(OUT / "reference.npz", image=image.astype(np.float32), prompt_embeds=cond, negative_embeds=uncond,
             settings=np.array(json.dumps(SPEC)))
    build_sdxl()
    print(f"wrote {OUT} and {XL_OUT} ({sum(p.stat().st_size for p in OUT.rglob('*') if p.is_file()) / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
