"""The importer's name contract at full size: each built graph declares exactly the state-dict keys and
shapes of the real SD 1.5, SD 2.x and SDXL components (diffusers/transformers modules made on torch's
meta device, so no weights are allocated). Dev-only: skipped without torch, diffusers and transformers;
the committed tiny fixtures (test_graphs.py) hold the same contract in CI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from frame.convert import graphs

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import sdxl_configs  # noqa: E402  (the published SDXL configs, tools/)

SD15_UNET = {"attention_head_dim": 8, "block_out_channels": [320, 640, 1280, 1280], "cross_attention_dim": 768,
             "layers_per_block": 2, "sample_size": 64}
SD2_UNET = {**SD15_UNET, "attention_head_dim": [5, 10, 20, 20], "cross_attention_dim": 1024,
            "use_linear_projection": True, "sample_size": 96}
OPENCLIP_H = {"vocab_size": 49408, "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 23,
              "num_attention_heads": 16, "max_position_embeddings": 77, "hidden_act": "gelu", "projection_dim": 512}


def _same(graph, shapes: dict[str, tuple[int, ...]]) -> None:
    declared = dict(graphs.weight_specs(graph))
    assert sorted(set(shapes) - set(declared)) == [], "keys the graph does not declare"
    assert sorted(set(declared) - set(shapes)) == [], "keys the module does not have"
    assert [k for k in declared if declared[k] != shapes[k]] == []


@pytest.mark.parametrize("config", [SD15_UNET, SD2_UNET, sdxl_configs.UNET], ids=["sd15", "sd2", "sdxl"])
def test_unet(config):
    with torch.device("meta"):
        module = diffusers.UNet2DConditionModel(**config)
    graph = graphs.build_unet(graphs.UNetConfig.from_diffusers(dict(module.config)))
    _same(graph, {k: tuple(v.shape) for k, v in module.state_dict().items()})


def test_vae():
    with torch.device("meta"):
        module = diffusers.AutoencoderKL(**sdxl_configs.VAE)
    cfg = graphs.VaeConfig.from_diffusers(dict(module.config))
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    _same(graphs.build_vae_decoder(cfg), {k: s for k, s in shapes.items() if k.startswith(("decoder.", "post_quant"))})
    _same(graphs.build_vae_encoder(cfg), {k: s for k, s in shapes.items() if k.startswith(("encoder.", "quant_conv"))})


@pytest.mark.parametrize("config,projection", [(sdxl_configs.CLIP_L, False), (OPENCLIP_H, False),
                                               (sdxl_configs.CLIP_BIGG, True)], ids=["clip-l", "openclip-h", "bigG"])
def test_text_encoder(config, projection):
    cfg = transformers.CLIPTextConfig(**config)
    with torch.device("meta"):
        module = (transformers.CLIPTextModelWithProjection if projection else transformers.CLIPTextModel)(cfg)
    shapes = {(k if k.startswith(("text_model.", "text_projection.")) else f"text_model.{k}"): tuple(v.shape)
              for k, v in module.state_dict().items()}  # the saved files' keys (transformers 5 drops text_model.)
    built = graphs.TextEncoderConfig.from_transformers(cfg.to_dict(), with_projection=projection, hidden_states=True)
    _same(graphs.build_text_encoder(built), shapes)
