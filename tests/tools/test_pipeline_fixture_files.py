"""The committed pipeline fixtures are complete and consistent with their own ONNX models (no torch).

Guards what frame's pipeline tests rely on: every case's noise, reference arrays and parameters are
present and agree with each other, and the recorded embeddings / images are what the exported ONNX
text encoders and VAE decoder produce from the recorded token ids / latents.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from frame.config.schema import SamplerName

ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "pipelines"
KINDS = ["sd15", "sdxl"]
SAMPLERS = set(get_args(SamplerName))


def _cases(kind: str) -> list[dict]:
    return json.loads((ROOT / kind / "cases.json").read_text(encoding="utf-8"))["cases"]


CASES = [(kind, case["name"]) for kind in KINDS for case in _cases(kind)]


def _case(kind: str, name: str) -> dict:
    return next(c for c in _cases(kind) if c["name"] == name)


def _ort(path: Path, feeds: dict) -> dict:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


@pytest.mark.parametrize("kind", KINDS)
def test_model_folder_layout(kind):
    model = ROOT / kind / "model"
    index = json.loads((model / "model_index.json").read_text())
    subs = ["text_encoder", "unet", "vae_decoder"] + (["text_encoder_2"] if kind == "sdxl" else [])
    assert index["_class_name"] == ("StableDiffusionXLPipeline" if kind == "sdxl" else "StableDiffusionPipeline")
    for sub in subs:
        assert (model / sub / "model.onnx").is_file() and (model / sub / "config.json").is_file()
    assert (model / "unet" / "model.onnx_data").is_file() == (kind == "sdxl")
    toks = ["tokenizer"] + (["tokenizer_2"] if kind == "sdxl" else [])
    for tok in toks:
        vocab = json.loads((model / tok / "vocab.json").read_text(encoding="utf-8"))
        assert len(vocab) == 3514 and vocab["<|endoftext|>"] == 3513
        pad = json.loads((model / tok / "special_tokens_map.json").read_text())["pad_token"]
        assert pad == ("!" if tok == "tokenizer_2" else "<|endoftext|>")
    sched = json.loads((model / "scheduler" / "scheduler_config.json").read_text())
    assert sched["clip_sample"] is False and sched["beta_schedule"] == "scaled_linear"


@pytest.mark.parametrize("kind", KINDS)
def test_unet_and_text_encoder_signatures(kind):
    model = ROOT / kind / "model"
    unet = onnx.load(str(model / "unet" / "model.onnx"), load_external_data=False)
    names = [i.name for i in unet.graph.input]
    extra = ["text_embeds", "time_ids"] if kind == "sdxl" else []
    assert names == ["sample", "timestep", "encoder_hidden_states", *extra]
    assert unet.graph.input[1].type.tensor_type.elem_type == TensorProto.FLOAT
    te = onnx.load(str(model / "text_encoder" / "model.onnx"))
    assert te.graph.input[0].type.tensor_type.elem_type == TensorProto.INT32
    outs = [o.name for o in te.graph.output]
    assert outs[:2] == ["last_hidden_state", "pooler_output"]
    assert any(o.startswith("hidden_states.") for o in outs) == (kind == "sdxl")


@pytest.mark.parametrize("kind", KINDS)
def test_readme_documents_every_case(kind):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n{kind} (")[1].split("\n\n")[1]
    listed = set(re.findall(r"^\| ([a-z0-9_]+) \|", section, re.M)) - {"case"}
    assert listed == {c["name"] for c in _cases(kind)}


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_case_arrays_match_description(kind, name):
    case = _case(kind, name)
    assert case["sampler"] in SAMPLERS
    noise = np.load(ROOT / kind / "noise" / case["noise"])
    assert noise.dtype == np.float32 and noise.shape == (1, 4, case["height"] // 8, case["width"] // 8)
    ref = np.load(ROOT / kind / case["reference"])
    assert {k: [str(ref[k].dtype), list(ref[k].shape)] for k in ref.files} == case["arrays"]
    assert ref["image"].shape == (1, case["height"], case["width"], 3)
    assert 0.0 <= ref["image"].min() and ref["image"].max() <= 1.0 and ref["image"].std() > 0.05
    assert ref["step_latents"].shape[0] == case["steps"] == ref["timesteps"].shape[0]
    np.testing.assert_array_equal(ref["latents"], ref["step_latents"][-1])
    assert ("step_noise" in ref.files) == (case["sampler"] in ("euler_a", "lcm"))
    assert ("negative_prompt_embeds" in ref.files) == (case["guidance"] > 1.0)
    assert case["onnx_rebuild_psnr_db"] >= 95.0  # 98 dB for DDIM with clipped x0, 120-139 dB otherwise
    ids = ref["input_ids"][0]
    assert ids[0] == 3512 and 3513 in ids


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_image_is_the_onnx_decode_of_the_latents(kind, name):
    case = _case(kind, name)
    ref = np.load(ROOT / kind / case["reference"])
    model = ROOT / kind / "model"
    scale = json.loads((model / "vae_decoder" / "config.json").read_text())["scaling_factor"]
    out = _ort(model / "vae_decoder" / "model.onnx", {"latent_sample": ref["latents"] / np.float32(scale)})
    image = np.clip(out["sample"] / 2 + 0.5, 0, 1).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(image, ref["image"], atol=1e-4)


@pytest.mark.parametrize(("kind", "name"), [c for c in CASES if c[1] in ("euler", "euler_no_negative")])
def test_prompt_embeds_are_the_onnx_text_encoders_output(kind, name):
    case = _case(kind, name)
    ref = np.load(ROOT / kind / case["reference"])
    model = ROOT / kind / "model"
    if kind == "sd15":
        out = _ort(model / "text_encoder" / "model.onnx", {"input_ids": ref["input_ids"].astype(np.int32)})
        np.testing.assert_allclose(out["last_hidden_state"], ref["prompt_embeds"], atol=1e-5)
        return
    one = _ort(model / "text_encoder" / "model.onnx", {"input_ids": ref["input_ids"].astype(np.int32)})
    two = _ort(model / "text_encoder_2" / "model.onnx", {"input_ids": ref["input_ids_2"].astype(np.int32)})
    joined = np.concatenate([one["hidden_states.1"], two["hidden_states.2"]], axis=-1)  # penultimate layers
    np.testing.assert_allclose(joined, ref["prompt_embeds"], atol=1e-5)
    np.testing.assert_allclose(two["text_embeds"], ref["pooled_prompt_embeds"], atol=1e-5)
    h, w = case["height"], case["width"]
    assert ref["add_time_ids"].tolist() == [[h, w, 0, 0, h, w]] * 2
    if case["negative_prompt"] is None:
        assert not ref["negative_prompt_embeds"].any() and not ref["negative_pooled_prompt_embeds"].any()


def test_total_size_under_budget():
    total = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert total < 7 * 1024 * 1024, total  # 6 MiB before the LoRA fixtures (issue 31: about 0.7 MB)


def test_ddim_from_an_euler_file_follows_the_file():
    """Issue 13 item 26: DDIM switched from a folder whose scheduler_config.json is an Euler "linspace"
    file. The reference reads the file (linspace timesteps, x0 clipped, final alpha 1); diffusers'
    in-memory Euler -> DDIM switch takes "leading" instead and lands ~15 dB away, which was the report."""
    cases = {c["name"]: c for c in _cases("sd15")}
    for name in ("ddim_euler_linspace_g5", "ddim_euler_linspace_g7_5"):
        case = cases[name]
        own = case["scheduler_config"]
        assert own["_class_name"] == "EulerDiscreteScheduler"
        assert own["timestep_spacing"] == "linspace" and "clip_sample" not in own
        config = case["scheduler"]["config"]
        assert case["scheduler"]["class"] == "DDIMScheduler" and config["timestep_spacing"] == "linspace"
        assert config["clip_sample"] is True and config["set_alpha_to_one"] is True
        assert np.load(ROOT / "sd15" / case["reference"])["timesteps"].tolist() == [999, 666, 333, 0]
        assert case["diffusers_in_memory_chain_psnr_db"] < 20
