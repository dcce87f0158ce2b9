"""The bundled demo model has the optimum diffusers ONNX layout and runs end to end (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

DEMO = Path(__file__).resolve().parents[2] / "frame" / "models" / "demo"


def _load_json(rel: str) -> dict:
    return json.loads((DEMO / rel).read_text(encoding="utf-8"))


def _signature(component: str) -> tuple[dict, dict]:
    model = onnx.load(str(DEMO / component / "model.onnx"), load_external_data=False)

    def describe(values):
        return {v.name: (v.type.tensor_type.elem_type,
                         [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]) for v in values}

    return describe(model.graph.input), describe(model.graph.output)


def test_layout_and_model_index():
    index = _load_json("model_index.json")
    assert index["_class_name"] == "StableDiffusionPipeline"
    assert index["text_encoder"] == ["transformers", "CLIPTextModel"]
    assert index["unet"] == ["diffusers", "UNet2DConditionModel"]
    assert index["scheduler"] == ["diffusers", "PNDMScheduler"]
    for rel in ("scheduler/scheduler_config.json", "tokenizer/vocab.json", "tokenizer/merges.txt",
                "tokenizer/tokenizer_config.json", "tokenizer/special_tokens_map.json",
                "text_encoder/model.onnx", "text_encoder/config.json", "unet/model.onnx", "unet/config.json",
                "vae_decoder/model.onnx", "vae_decoder/config.json", "vae_encoder/model.onnx",
                "vae_encoder/config.json", "README.md"):
        assert (DEMO / rel).is_file(), rel
    total = sum(f.stat().st_size for f in DEMO.rglob("*") if f.is_file())
    assert total < 8 * 1024 * 1024


def test_scheduler_has_sd15_schedule():
    cfg = _load_json("scheduler/scheduler_config.json")
    assert cfg["_class_name"] == "PNDMScheduler"
    assert (cfg["beta_start"], cfg["beta_end"], cfg["beta_schedule"]) == (0.00085, 0.012, "scaled_linear")
    assert cfg["num_train_timesteps"] == 1000 and cfg["steps_offset"] == 1
    assert cfg["prediction_type"] == "epsilon"


def test_tokenizer_is_the_real_clip_vocabulary():
    vocab = _load_json("tokenizer/vocab.json")
    merges = (DEMO / "tokenizer" / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 49408 and sorted(vocab.values()) == list(range(49408))
    assert merges[0].startswith("#version") and len(merges) - 1 == 48894
    assert vocab["<|startoftext|>"] == 49406 and vocab["<|endoftext|>"] == 49407
    # ids every SD user has seen: "a photo of a cat"
    assert [vocab[t] for t in ("a</w>", "photo</w>", "of</w>", "cat</w>")] == [320, 1125, 539, 2368]
    # every merge's result is a token, in merge order after the 512 byte symbols
    first = merges[1].split()
    assert vocab["".join(first)] == 512
    special = _load_json("tokenizer/special_tokens_map.json")
    assert special["pad_token"] == "<|endoftext|>"
    assert _load_json("tokenizer/tokenizer_config.json")["model_max_length"] == 77


def test_component_signatures_follow_optimum():
    ins, outs = _signature("text_encoder")
    assert ins == {"input_ids": (TensorProto.INT32, ["batch_size", "sequence_length"])}
    assert list(outs) == ["last_hidden_state", "pooler_output"]
    ins, outs = _signature("unet")
    assert list(ins) == ["sample", "timestep", "encoder_hidden_states"]
    assert ins["sample"] == (TensorProto.FLOAT, ["batch_size", 4, "height", "width"])
    assert ins["timestep"] == (TensorProto.FLOAT, ["steps"])
    assert list(outs) == ["out_sample"]
    ins, outs = _signature("vae_decoder")
    assert ins == {"latent_sample": (TensorProto.FLOAT, ["batch_size", 4, "height_latent", "width_latent"])}
    assert list(outs) == ["sample"]
    ins, outs = _signature("vae_encoder")
    assert ins == {"sample": (TensorProto.FLOAT, ["batch_size", 3, "height", "width"])}
    assert list(outs) == ["latent_sample"]
    encoder = onnx.load(str(DEMO / "vae_encoder" / "model.onnx"))
    assert [n.op_type for n in encoder.graph.node].count("RandomNormalLike") == 1  # optimum < 1.23's sample()
    assert _load_json("vae_decoder/config.json")["scaling_factor"] == 0.18215
    assert _load_json("unet/config.json")["cross_attention_dim"] == _load_json("text_encoder/config.json")[
        "hidden_size"]


def test_token_embedding_stored_fp16_with_cast():
    model = onnx.load(str(DEMO / "text_encoder" / "model.onnx"))
    big = [t for t in model.graph.initializer if np.prod(t.dims) >= 49408]
    assert len(big) == 1 and big[0].data_type == TensorProto.FLOAT16 and list(big[0].dims) == [49408, 32]
    casts = [n for n in model.graph.node if n.op_type == "Cast" and n.input[0] == big[0].name]
    assert len(casts) == 1 and casts[0].attribute[0].i == TensorProto.FLOAT


def test_runs_end_to_end_at_512x320_with_onnxruntime():
    ort = pytest.importorskip("onnxruntime")

    def session(name):
        return ort.InferenceSession(str(DEMO / name / "model.onnx"), providers=["CPUExecutionProvider"])

    ids = np.full((2, 77), 49407, dtype=np.int32)
    ids[:, 0] = 49406
    ids[0, 1:5] = [320, 1125, 539, 2368]
    hidden = session("text_encoder").run(["last_hidden_state"], {"input_ids": ids})[0]
    assert hidden.shape == (2, 77, 32)
    latent = np.random.default_rng(0).standard_normal((2, 4, 40, 64)).astype(np.float32)
    eps = session("unet").run(None, {"sample": latent, "timestep": np.array([981.0], np.float32),
                                     "encoder_hidden_states": hidden})[0]
    assert eps.shape == latent.shape and np.isfinite(eps).all()
    assert not np.allclose(eps[0], eps[1])  # the prompt reaches the UNet through cross-attention
    image = session("vae_decoder").run(None, {"latent_sample": latent[:1] / 0.18215})[0]
    assert image.shape == (1, 3, 320, 512) and np.isfinite(image).all()
