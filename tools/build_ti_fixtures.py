"""Textual-inversion fixtures: embedding files in A1111's layouts and diffusers' pictures with them.

Dev-only (torch 2.13.0, diffusers 0.42.1, transformers 5.24.0, safetensors, onnx). The tiny torch
pipelines are rebuilt from the fixture seed by ``tools/build_lora_fixtures.py``'s ``rebuilt_pipeline``
(the same seeded builders that made ``tests/fixtures/pipelines/<kind>``; their token tables are checked
equal to the export's here), so each reference is a true diffusers render: ``pipe.load_textual_inversion``
of the A1111 files, then ``pipe(prompt, negative_prompt=..., num_inference_steps, guidance_scale,
generator=torch.Generator().manual_seed(seed), output_type="np", height, width)`` with the scheduler the
test uses (the model folder's scheduler_config.json as ``pipeline_cases.make_scheduler`` reads it for the
sampler), no ``latents=`` passed: the start noise is diffusers' own draw from the seed, which frame
reproduces with ``noise="torch-cpu"``.

For the tiny SD 1.5 pipeline of ``tests/fixtures/pipelines/sd15`` it writes
``tests/fixtures/textual_inversion/sd15/``:

* ``embeddings/inkwash.pt``: A1111's own training output (``string_to_param {"*": (2, 32)}``,
  ``string_to_token``, ``name``, ``step``), saved with ``torch.save``;
* ``embeddings/badhands.safetensors``: one ``emb_params`` tensor (1, 32), the usual negative embedding;
* ``reference.npz``: the picture (``image``) and the pipeline's prompt embeddings after loading both
  files (``encode_prompt``, whose ``maybe_convert_prompt`` expands the multi-vector token).

For the tiny SDXL pipeline, ``tests/fixtures/textual_inversion/sdxl/``: ``embeddings/xlstyle.safetensors``
(``clip_l`` (2, 16) and ``clip_g`` (2, 24)), loaded into the pipeline's two text encoders as diffusers'
docs show (``clip_l`` with ``text_encoder``/``tokenizer``, ``clip_g`` with ``text_encoder_2``/
``tokenizer_2``), and ``reference.npz`` as above (prompt embeddings: both encoders' penultimate states;
``pooled``: ``text_embeds``).

    PYTHONPATH=$PWD /work/main/.venv/bin/python tools/build_ti_fixtures.py
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

import pipeline_cases as pc  # noqa: E402
from build_lora_fixtures import rebuilt_pipeline  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PIPELINES = REPO / "tests" / "fixtures" / "pipelines"
OUT = REPO / "tests" / "fixtures" / "textual_inversion"
SPECS = {
    "sd15": dict(prompt="a lighthouse on a cliff at dusk, inkwash, oil painting", negative_prompt="badhands, blurry",
                 steps=6, guidance=7.5, width=96, height=64, seed=4321, sampler="euler"),
    "sdxl": dict(prompt="a lighthouse on a cliff at dusk, xlstyle, oil painting", negative_prompt="blurry",
                 steps=5, guidance=6.0, width=96, height=64, seed=99, sampler="euler"),
}
ENCODERS = {"sd15": ["text_encoder"], "sdxl": ["text_encoder", "text_encoder_2"]}


def checked_pipeline(kind: str):
    """The rebuilt torch pipeline, refused unless its token tables are the exported ones (the
    embeddings' scale is drawn from them and frame overrides rows of the exported table)."""
    pipe = rebuilt_pipeline(kind)
    for sub in ENCODERS[kind]:
        proto = onnx.load(str(PIPELINES / kind / "model" / sub / "model.onnx"))
        table = next(numpy_helper.to_array(t) for t in proto.graph.initializer
                     if t.name.endswith("token_embedding.weight"))
        if not np.array_equal(table, getattr(pipe, sub).get_input_embeddings().weight.detach().numpy()):
            raise SystemExit(f"the rebuilt {kind} {sub} is not the exported one")
    return pipe


def table_std(encoder) -> float:
    return float(encoder.get_input_embeddings().weight.detach().numpy().std())


def write_sd15_embeddings(folder: Path, pipe) -> None:
    from safetensors.torch import save_file

    rng = np.random.default_rng(2024)
    width = pipe.text_encoder.get_input_embeddings().weight.shape[1]
    scale = table_std(pipe.text_encoder) * 3  # distinctive: a learned vector sits well off the vocabulary's rows
    ink = torch.from_numpy(rng.normal(0, scale, (2, width)).astype(np.float32))
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": ink.requires_grad_(True)},
                "name": "inkwash", "step": 500, "sd_checkpoint": "0123abcd", "sd_checkpoint_name": "tiny"},
               folder / "inkwash.pt")
    bad = torch.from_numpy(rng.normal(0, scale, (1, width)).astype(np.float32))
    save_file({"emb_params": bad}, str(folder / "badhands.safetensors"))


def write_sdxl_embeddings(folder: Path, pipe) -> None:
    from safetensors.torch import save_file

    rng = np.random.default_rng(7)
    tables = {}
    for key, encoder in (("clip_l", pipe.text_encoder), ("clip_g", pipe.text_encoder_2)):
        width = encoder.get_input_embeddings().weight.shape[1]
        tables[key] = torch.from_numpy(rng.normal(0, table_std(encoder) * 3, (2, width)).astype(np.float32))
    save_file(tables, str(folder / "xlstyle.safetensors"))


def load_embeddings(kind: str, folder: Path, pipe) -> None:
    """``load_textual_inversion`` as diffusers' docs show for A1111's files of each kind."""
    if kind == "sd15":
        pipe.load_textual_inversion(str(folder / "inkwash.pt"), token="inkwash")
        pipe.load_textual_inversion(str(folder / "badhands.safetensors"), token="badhands")
        return
    from safetensors.torch import load_file

    state = load_file(str(folder / "xlstyle.safetensors"))
    pipe.load_textual_inversion(state["clip_l"], token="xlstyle", text_encoder=pipe.text_encoder,
                                tokenizer=pipe.tokenizer)
    pipe.load_textual_inversion(state["clip_g"], token="xlstyle", text_encoder=pipe.text_encoder_2,
                                tokenizer=pipe.tokenizer_2)


def render(kind: str, pipe) -> dict[str, np.ndarray]:
    """diffusers' own render from the seed, and the prompt embeddings its encode_prompt makes."""
    spec = SPECS[kind]
    case = pc.Case(f"ti_{kind}", spec["sampler"], spec["prompt"], spec["negative_prompt"], spec["steps"],
                   spec["guidance"], spec["width"], spec["height"], "")
    config = json.loads((PIPELINES / kind / "model" / "scheduler" / "scheduler_config.json").read_text())
    pipe.scheduler = pc.make_scheduler(case, config)
    embeds = pc.encode(pipe, case, kind == "sdxl")
    with torch.no_grad():
        result = pipe(prompt=case.prompt, negative_prompt=case.negative_prompt, num_inference_steps=case.steps,
                      guidance_scale=case.guidance, generator=torch.Generator().manual_seed(spec["seed"]),
                      output_type="np", height=case.height, width=case.width)
    arrays = {"image": np.asarray(result.images, dtype=np.float32), "prompt_embeds": embeds["prompt_embeds"],
              "negative_embeds": embeds["negative_prompt_embeds"], "settings": np.array(json.dumps(spec))}
    if kind == "sdxl":
        arrays.update(pooled=embeds["pooled_prompt_embeds"], negative_pooled=embeds["negative_pooled_prompt_embeds"])
    return arrays


def build(kind: str) -> None:
    out = OUT / kind
    if out.exists():
        shutil.rmtree(out)
    (out / "embeddings").mkdir(parents=True)
    pipe = checked_pipeline(kind)
    (write_sd15_embeddings if kind == "sd15" else write_sdxl_embeddings)(out / "embeddings", pipe)
    load_embeddings(kind, out / "embeddings", pipe)
    np.savez(out / "reference.npz", **render(kind, pipe))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1024
    print(f"wrote {out} ({size:.0f} KiB)")


def main() -> int:
    torch.set_num_threads(1)
    for kind in sys.argv[1:] or ["sd15", "sdxl"]:
        build(kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
