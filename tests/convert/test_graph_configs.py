"""The graph configs read config.json dicts and refuse, with one line naming the field, what the
builders do not implement."""

from __future__ import annotations

import pytest

from frame.convert.graphs import TextEncoderConfig, UNetConfig, VaeConfig
from frame.errors import FrameError

SD_VAE = {"block_out_channels": [128, 256, 512, 512], "down_block_types": ["DownEncoderBlock2D"] * 4,
          "up_block_types": ["UpDecoderBlock2D"] * 4, "layers_per_block": 2, "latent_channels": 4,
          "norm_num_groups": 32, "scaling_factor": 0.18215, "_class_name": "AutoencoderKL"}


def test_vae_config_reads_sd_vae():
    cfg = VaeConfig.from_diffusers(SD_VAE)
    assert cfg.block_out_channels == (128, 256, 512, 512) and cfg.layers_per_block == 2
    assert cfg.mid_block_add_attention and cfg.use_quant_conv and cfg.use_post_quant_conv


@pytest.mark.parametrize("change,field", [
    ({"act_fn": "relu"}, "act_fn"),
    ({"norm_type": "spatial"}, "norm_type"),
    ({"up_block_types": ["AttnUpDecoderBlock2D"] * 4}, "block types"),
    ({"block_out_channels": [128, -1]}, "block_out_channels"),
    ({"layers_per_block": "2"}, "layers_per_block"),
    ({"norm_num_groups": 10**9}, "norm_num_groups"),  # np.ones(groups) would be 4 GB
    ({"block_out_channels": [128] * 100, "down_block_types": ["DownEncoderBlock2D"] * 100,
      "up_block_types": ["UpDecoderBlock2D"] * 100}, "block_out_channels"),
])
def test_vae_config_refuses_what_is_not_built(change, field):
    with pytest.raises(FrameError, match=field):
        VaeConfig.from_diffusers({**SD_VAE, **change})


CLIP_L = {"vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
          "num_attention_heads": 12, "max_position_embeddings": 77, "hidden_act": "quick_gelu",
          "projection_dim": 768, "eos_token_id": 2, "architectures": ["CLIPTextModel"]}


def test_text_config_projection_and_hidden_states_follow_the_architecture():
    plain = TextEncoderConfig.from_transformers(CLIP_L)
    assert not plain.with_projection and not plain.hidden_states
    bigg = TextEncoderConfig.from_transformers({**CLIP_L, "architectures": ["CLIPTextModelWithProjection"],
                                                "hidden_act": "gelu"})
    assert bigg.with_projection and bigg.hidden_states and bigg.hidden_act == "gelu"
    assert TextEncoderConfig.from_transformers(CLIP_L, hidden_states=True).hidden_states


@pytest.mark.parametrize("change,field", [
    ({"hidden_act": "relu"}, "hidden_act"),
    ({"num_attention_heads": 5}, "attention heads"),
    ({"layer_norm_eps": 0}, "layer_norm_eps"),
    ({"eos_token_id": "2"}, "eos_token_id"),
    ({"num_hidden_layers": 10**6}, "num_hidden_layers"),  # a graph of a million layers
    ({"vocab_size": 10**12}, "vocab_size"),
])
def test_text_config_refuses_what_is_not_built(change, field):
    with pytest.raises(FrameError, match=field):
        TextEncoderConfig.from_transformers({**CLIP_L, **change})


SDXL_UNET = {"addition_embed_type": "text_time", "addition_time_embed_dim": 256, "attention_head_dim": [5, 10, 20],
             "block_out_channels": [320, 640, 1280], "cross_attention_dim": 2048,
             "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
             "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
             "projection_class_embeddings_input_dim": 2816, "transformer_layers_per_block": [1, 2, 10],
             "use_linear_projection": True, "layers_per_block": 2, "norm_num_groups": 32}


def test_unet_config_reads_sdxl_and_the_legacy_head_count():
    cfg = UNetConfig.from_diffusers(SDXL_UNET)
    assert cfg.num_attention_heads == (5, 10, 20) and cfg.transformer_layers_per_block == (1, 2, 10)
    assert cfg.text_time and cfg.text_embeds_dim == 1280 and cfg.time_embed_dim == 1280
    sd15 = UNetConfig.from_diffusers({"attention_head_dim": 8, "cross_attention_dim": 768})
    assert sd15.num_attention_heads == (8, 8, 8, 8) and sd15.layers_per_block == (2, 2, 2, 2)


@pytest.mark.parametrize("change,field", [
    ({"class_embed_type": "timestep"}, "class_embed_type"),
    ({"addition_embed_type": "text"}, "addition_embed_type"),
    ({"resnet_time_scale_shift": "scale_shift"}, "resnet_time_scale_shift"),
    ({"mid_block_type": None, "time_embedding_type": "fourier"}, "time_embedding_type"),
    ({"down_block_types": ["DownBlock2D", "AttnDownBlock2D", "CrossAttnDownBlock2D"]}, "block types"),
    ({"transformer_layers_per_block": [1, 2]}, "transformer_layers_per_block"),
    ({"attention_head_dim": [5, 7, 20]}, "attention heads"),
    ({"cross_attention_dim": [2048, 1024, 2048]}, "cross_attention_dim"),
    ({"reverse_transformer_layers_per_block": [[10, 10, 10], [2, 2, 2], [1, 1, 1]]},
     "reverse_transformer_layers_per_block"),
    ({"transformer_layers_per_block": [1, 2, 10**6]}, "transformer_layers_per_block"),
    ({"layers_per_block": [2, "2", 2]}, "layers_per_block"),
    ({"freq_shift": "0"}, "freq_shift"),
    ({"downsample_padding": "1"}, "downsample_padding"),
    ({"norm_eps": -1}, "norm_eps"),
    ({"projection_class_embeddings_input_dim": 1536}, "text_embeds"),
])
def test_unet_config_refuses_what_is_not_built(change, field):
    with pytest.raises(FrameError, match=field):
        UNetConfig.from_diffusers({**SDXL_UNET, **change})
