"""Build the fixtures of frame's own SD graphs (frame.convert.graphs) against torch.

Dev-only (torch, diffusers, transformers). Each case is a tiny random-weight diffusers/transformers
module of one architecture; ``tests/fixtures/graphs/<case>/`` gets its ``case.json`` (which builder,
the component's config.json dict, the builder's options), ``weights.npz`` (the module's state-dict
tensors the graph reads, under their state-dict keys, rounded to and stored as float16: the module is
run on the rounded values, and the graph computes in float32), ``inputs.npz`` (feeds by ONNX input name,
plus ``noise`` for a sampling VAE encoder) and ``expected.npz`` (torch's outputs by ONNX output name).
The build checks that the graph declares exactly the module's state-dict keys with torch's shapes, so
a committed fixture is also the name contract the importer relies on.

    PYTHONPATH=. /work/main/.venv/bin/python tools/build_graph_fixtures.py [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tiny_models as tm  # noqa: E402

from tests.convert.graph_cases import build_case  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "graphs"
SEED = 41


@dataclass
class Case:
    name: str
    kind: str  # vae_decoder | vae_encoder | text_encoder | unet
    make: Callable[[], torch.nn.Module]
    feeds: Callable[[np.random.Generator, Any], dict[str, np.ndarray]]
    run: Callable[[Any, dict[str, np.ndarray]], dict[str, np.ndarray]]
    options: dict[str, Any] = field(default_factory=dict)
    keys: Callable[[str], bool] = lambda key: True  # which state-dict keys this component's graph holds
    weights_from: str | None = None  # a case of the same module whose weights.npz this one reads


def _saved_key(key: str) -> str:
    """The key as the module's files hold it: transformers 5 drops CLIPTextModel's ``text_model.`` in
    memory but writes it back in ``save_pretrained`` (and every published text_encoder has it)."""
    return key if key.startswith(("text_model.", "text_projection.")) or "." not in key or not key.startswith(
        ("embeddings.", "encoder.", "final_layer_norm.")) else f"text_model.{key}"


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy()


def _torch(feeds: dict[str, np.ndarray], name: str) -> torch.Tensor:
    return torch.from_numpy(np.array(feeds[name], copy=True))


# ---------------------------------------------------------------------- VAE
def _vae_config(**overrides) -> dict[str, Any]:
    return tm.merged(tm.VAE, overrides)


def _latents(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    return {"latent_sample": rng.standard_normal((2, model.config.latent_channels, 3, 4)).astype(np.float32)}


def _pixels(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    return {"sample": rng.uniform(-1, 1, (1, model.config.in_channels, 24, 40)).astype(np.float32)}


def _pixels_and_noise(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    noise = rng.standard_normal((1, model.config.latent_channels, 3, 5)).astype(np.float32)
    return {**_pixels(rng, model), "noise": noise}


def _decode(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"sample": _np(model.decode(_torch(feeds, "latent_sample")).sample)}


def _encode(style: str) -> Callable[[Any, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    def run(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        dist = model.encode(_torch(feeds, "sample")).latent_dist
        if style == "parameters":
            return {"latent_parameters": _np(dist.parameters)}
        if style == "mean":
            return {"latent_sample": _np(dist.mode())}
        return {"latent_sample": _np(dist.mean + dist.std * _torch(feeds, "noise"))}
    return run


def _decoder_key(key: str) -> bool:
    return key.startswith(("decoder.", "post_quant_conv."))


def _encoder_key(key: str) -> bool:
    return key.startswith(("encoder.", "quant_conv."))


# ---------------------------------------------------------------------- TAESD (AutoencoderTiny)
def _tiny(width: int) -> Callable[[], torch.nn.Module]:
    """AutoencoderTiny of TAESD's real block structure (4 stages, 1/3/3/3 and 3/3/3/1 blocks) at ``width``
    channels (TAESD's 64 would commit 2.4 MB per half; tests/convert/test_taesd.py checks 64 with torch)."""
    def make() -> torch.nn.Module:
        from diffusers import AutoencoderTiny

        torch.manual_seed(SEED)
        return AutoencoderTiny(encoder_block_out_channels=(width,) * 4, decoder_block_out_channels=(width,) * 4).eval()
    return make


def _tiny_latents(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    return {"latent_sample": (2.5 * rng.standard_normal((1, 4, 4, 5))).astype(np.float32)}


def _tiny_encode(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"latent_sample": _np(model.encode(_torch(feeds, "sample")).latents)}


def _tiny_decoder_key(key: str) -> bool:
    return key.startswith("decoder.")


# ---------------------------------------------------------------------- text encoders
def _clip(config: dict[str, Any], projection: bool) -> Callable[[], torch.nn.Module]:
    small = {"vocab_size": 100, "bos_token_id": 98, "eos_token_id": 99}  # a 100-row token table: fixture size
    return lambda: tm.clip_text(SEED, tm.merged(tm.merged(tm.CLIP_TEXT, small), config), with_projection=projection)


def _ids(batch: int, length: int) -> Callable[[np.random.Generator, Any], dict[str, np.ndarray]]:
    """CLIP token rows: BOS, words, EOS (the largest id, as in CLIP's vocabulary), then padding: EOS in
    the first row (SD 1.5's tokenizer), 0 in the others (SDXL's second tokenizer)."""
    def feeds(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
        bos, eos = model.config.bos_token_id, model.config.vocab_size - 1
        ids = np.zeros((batch, length), np.int32)
        ids[0] = eos
        for row in range(batch):
            words = int(rng.integers(1, length - 1))
            ids[row, 0], ids[row, words + 1] = bos, eos
            ids[row, 1:words + 1] = rng.integers(2, bos, words)
        return {"input_ids": ids}
    return feeds


def _encode_text(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = model(input_ids=_torch(feeds, "input_ids").long(), output_hidden_states=True)
    result = {"last_hidden_state": _np(out.last_hidden_state)}
    if hasattr(out, "text_embeds"):
        result["text_embeds"] = _np(out.text_embeds)
    else:
        result["pooler_output"] = _np(out.pooler_output)
    return result


def _with_hidden_states(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = model(input_ids=_torch(feeds, "input_ids").long(), output_hidden_states=True)
    return {**_encode_text(model, feeds), **{f"hidden_states.{i}": _np(h) for i, h in enumerate(out.hidden_states)}}


# ---------------------------------------------------------------------- UNets
def _unet_inputs(batch: int, seq: int, steps: int) -> Callable[[np.random.Generator, Any], dict[str, np.ndarray]]:
    def feeds(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
        cfg = model.config
        out = {"sample": rng.standard_normal((batch, cfg.in_channels, 4, 6)).astype(np.float32),
               "timestep": np.array([501.0, 301.0][:steps], np.float32),
               "encoder_hidden_states": rng.standard_normal((batch, seq, cfg.cross_attention_dim)).astype(np.float32)}
        if cfg.addition_embed_type == "text_time":
            pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
            out["text_embeds"] = rng.standard_normal((batch, pooled)).astype(np.float32)
            out["time_ids"] = np.tile(np.array([32, 48, 0, 0, 32, 48], np.float32), (batch, 1))
        if cfg.time_cond_proj_dim is not None:
            out["timestep_cond"] = rng.standard_normal((batch, cfg.time_cond_proj_dim)).astype(np.float32)
        return out
    return feeds


def _denoise(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    added = {k: _torch(feeds, k) for k in ("text_embeds", "time_ids") if k in feeds} or None
    cond = _torch(feeds, "timestep_cond") if "timestep_cond" in feeds else None
    out = model(_torch(feeds, "sample"), _torch(feeds, "timestep"), _torch(feeds, "encoder_hidden_states"),
                added_cond_kwargs=added, timestep_cond=cond, return_dict=False)[0]
    return {"out_sample": _np(out)}


def _unet(config: dict[str, Any], **overrides) -> Callable[[], torch.nn.Module]:
    return lambda: tm.unet(SEED, tm.merged(config, overrides))


# SD 2.x: linear projections, a head count per block, a wider text context (OpenCLIP-H's 1024 in full size)
SD2_UNET = {**tm.SD15_UNET, "use_linear_projection": True, "attention_head_dim": (2, 4), "cross_attention_dim": 24,
            "upcast_attention": True}

VAE_SMALL = {"block_out_channels": (4, 8), "down_block_types": ("DownEncoderBlock2D",) * 2,
             "up_block_types": ("UpDecoderBlock2D",) * 2, "layers_per_block": 2}

CASES = [
    Case("vae_decoder", "vae_decoder", lambda: tm.vae(SEED, _vae_config()), _latents, _decode, keys=_decoder_key),
    Case("vae_decoder_2blocks_noattn", "vae_decoder",
         lambda: tm.vae(SEED, _vae_config(**VAE_SMALL, mid_block_add_attention=False)), _latents, _decode,
         keys=_decoder_key),
    Case("vae_encoder_parameters", "vae_encoder", lambda: tm.vae(SEED, _vae_config()), _pixels,
         _encode("parameters"), {"style": "parameters"}, _encoder_key),
    Case("vae_encoder_sampled", "vae_encoder", lambda: tm.vae(SEED, _vae_config()), _pixels_and_noise,
         _encode("sampled"), {"style": "sampled"}, _encoder_key, weights_from="vae_encoder_parameters"),
    Case("taesd_decoder", "taesd_decoder", _tiny(16), _tiny_latents, _decode, keys=_tiny_decoder_key),
    Case("taesd_encoder", "taesd_encoder", _tiny(16), _pixels, _tiny_encode, keys=_encoder_key),
    # SD 1.x: OpenAI CLIP ViT-L, quick_gelu, eos_token_id 2 (the pooled state at the largest id), 77 tokens
    Case("clip_l", "text_encoder", _clip({"eos_token_id": 2}, False), _ids(2, 77), _encode_text),
    # SD 2.x: OpenCLIP ViT-H, gelu, the first eos_token_id, a prompt run through its end-of-text (9 tokens)
    Case("openclip_h_short", "text_encoder", _clip({"hidden_act": "gelu", "num_hidden_layers": 3}, False),
         _ids(1, 9), _with_hidden_states, {"hidden_states": True}),
    # SDXL text_encoder_2: OpenCLIP bigG with its projection and every layer's hidden state
    Case("openclip_bigg", "text_encoder", _clip({"hidden_act": "gelu", "eos_token_id": 2}, True), _ids(2, 20),
         _with_hidden_states, {"with_projection": True, "hidden_states": True}),
    # SD 1.x: conv projections, 2 heads everywhere, one timestep for the guided batch of 2
    Case("unet_sd1", "unet", _unet(tm.SD15_UNET), _unet_inputs(2, 77, 1), _denoise),
    Case("unet_sd2", "unet", _unet(SD2_UNET), _unet_inputs(2, 12, 2), _denoise),
    # SDXL: text_time added conditioning, no attention in the first block, two transformer layers deeper
    Case("unet_sdxl", "unet", _unet(tm.SDXL_UNET), _unet_inputs(2, 12, 2), _denoise),
    # LCM-distilled: the guidance scale's embedding as timestep_cond; one level, so no resampling at all
    Case("unet_lcm_one_level", "unet", _unet(tm.SD15_UNET, time_cond_proj_dim=8, block_out_channels=(8,),
                                             down_block_types=("CrossAttnDownBlock2D",),
                                             up_block_types=("CrossAttnUpBlock2D",)),
         _unet_inputs(1, 12, 1), _denoise),
]


# ---------------------------------------------------------------------- building
def _config_of(model: Any) -> dict[str, Any]:
    config = model.config
    data = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    return json.loads(json.dumps(data, default=list))


def build(case: Case) -> dict[str, float]:
    model = case.make().eval()
    with torch.no_grad():  # weights are committed as float16 (half the bytes): torch runs on the same values
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())
    config = _config_of(model)
    graph = build_case(case.kind, config, case.options)
    state = {_saved_key(k) if case.kind == "text_encoder" else k: v for k, v in model.state_dict().items()
             if case.keys(k)}
    declared = {init.name: tuple(init.dims) for init in graph.graph.initializer}
    torch_shapes = {k: tuple(v.shape) for k, v in state.items()}
    if declared != torch_shapes:
        missing, extra = sorted(set(torch_shapes) - set(declared)), sorted(set(declared) - set(torch_shapes))
        wrong = sorted(k for k in set(declared) & set(torch_shapes) if declared[k] != torch_shapes[k])
        raise SystemExit(f"{case.name}: graph names differ from the state dict: missing {missing[:5]}, "
                         f"extra {extra[:5]}, wrong shapes {[(k, declared[k], torch_shapes[k]) for k in wrong[:5]]}")
    feeds = case.feeds(np.random.default_rng(SEED), model)
    with torch.no_grad():
        expected = case.run(model, feeds)
    folder = OUT / case.name
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"kind": case.kind, "config": config, "options": case.options}
    if case.weights_from:
        meta["weights_from"] = case.weights_from
    else:
        np.savez(folder / "weights.npz", **{k: _np(v).astype(np.float16) for k, v in state.items()})
    (folder / "case.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    np.savez(folder / "inputs.npz", **feeds)
    np.savez(folder / "expected.npz", **expected)
    return {name: float(np.abs(v).max()) for name, v in expected.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="case name (repeatable)")
    args = parser.parse_args()
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        print(case.name, build(case))
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"fixtures: {total / 1024:.0f} KiB in {OUT}")


if __name__ == "__main__":
    main()
