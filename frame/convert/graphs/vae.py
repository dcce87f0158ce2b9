"""AutoencoderKL's decoder and encoder as the graphs optimum exports: ``vae_decoder`` (``latent_sample``
→ ``sample``, ``post_quant_conv`` then the decoder, as ``vae.decode``) and ``vae_encoder`` (``sample`` →
the encoder and ``quant_conv``, in one of the exporters' three output styles).

Initializer names are the AutoencoderKL state-dict keys (``decoder.up_blocks.0.resnets.0.conv1.weight``,
``post_quant_conv.weight``); a decoder graph holds no encoder key and the other way round, so each
component's folder gets only its own tensors. Heights and widths are dynamic; the decoder's are the
latent's times 2^(blocks - 1).
"""

from __future__ import annotations

import onnx

from frame.convert.graphs import blocks as B
from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import FLOAT, GraphBuilder
from frame.convert.graphs.configs import VaeConfig

EPS = 1e-6  # every norm of diffusers' Encoder and Decoder
ENCODER_STYLES = ("sampled", "parameters", "mean")  # tools/tiny_models.py VAE_ENCODER_STYLES


def _mid_block(g: GraphBuilder, x: str, prefix: str, cfg: VaeConfig) -> str:
    channels, groups = cfg.block_out_channels[-1], cfg.norm_num_groups
    x = B.resnet(g, x, f"{prefix}.resnets.0", channels, channels, groups, EPS)
    if cfg.mid_block_add_attention:
        x = B.spatial_attention(g, x, f"{prefix}.attentions.0", channels, groups, EPS)
    return B.resnet(g, x, f"{prefix}.resnets.1", channels, channels, groups, EPS)


def _tail(g: GraphBuilder, x: str, prefix: str, channels: int, cout: int, groups: int) -> str:
    h = L.group_norm(g, x, f"{prefix}.conv_norm_out", channels, groups, EPS)
    return L.conv2d(g, L.silu(g, h, f"{prefix}.conv_norm_out"), f"{prefix}.conv_out", channels, cout, 3)


def decoder_body(g: GraphBuilder, z: str, cfg: VaeConfig, prefix: str = "decoder") -> str:
    """diffusers' ``Decoder`` on latents ``z`` (after post_quant_conv); TAESD-free, AutoencoderKL's."""
    channels = list(reversed(cfg.block_out_channels))
    groups = cfg.norm_num_groups
    x = L.conv2d(g, z, f"{prefix}.conv_in", cfg.latent_channels, channels[0], 3)
    x = _mid_block(g, x, f"{prefix}.mid_block", cfg)
    cin = channels[0]
    for i, cout in enumerate(channels):
        for j in range(cfg.layers_per_block + 1):
            x = B.resnet(g, x, f"{prefix}.up_blocks.{i}.resnets.{j}", cin if j == 0 else cout, cout, groups, EPS)
        if i < len(channels) - 1:
            x = L.upsample(g, x, f"{prefix}.up_blocks.{i}.upsamplers.0", cout)
        cin = cout
    return _tail(g, x, prefix, channels[-1], cfg.out_channels, groups)


def encoder_body(g: GraphBuilder, x: str, cfg: VaeConfig, prefix: str = "encoder") -> str:
    """diffusers' ``Encoder`` (double_z): pixels → 2·latent_channels moments."""
    channels, groups = cfg.block_out_channels, cfg.norm_num_groups
    x = L.conv2d(g, x, f"{prefix}.conv_in", cfg.in_channels, channels[0], 3)
    cin = channels[0]
    for i, cout in enumerate(channels):
        for j in range(cfg.layers_per_block):
            x = B.resnet(g, x, f"{prefix}.down_blocks.{i}.resnets.{j}", cin if j == 0 else cout, cout, groups, EPS)
        if i < len(channels) - 1:
            x = L.downsample(g, x, f"{prefix}.down_blocks.{i}.downsamplers.0", cout, padding=0)
        cin = cout
    x = _mid_block(g, x, f"{prefix}.mid_block", cfg)
    return _tail(g, x, prefix, channels[-1], 2 * cfg.latent_channels, groups)


def build_vae_decoder(cfg: VaeConfig) -> onnx.ModelProto:
    """``latent_sample`` (batch, latent_channels, h, w) → ``sample`` (batch, out_channels, 8h, 8w for SD)."""
    g = GraphBuilder("vae_decoder")
    z = g.input("latent_sample", FLOAT, ["batch_size", cfg.latent_channels, "height_latent", "width_latent"])
    if cfg.use_post_quant_conv:
        z = L.conv2d(g, z, "post_quant_conv", cfg.latent_channels, cfg.latent_channels, 1)
    g.output(decoder_body(g, z, cfg), "sample", FLOAT, ["batch_size", cfg.out_channels, "height", "width"])
    return g.model("AutoencoderKL decoder (frame.convert.graphs)")


def build_vae_encoder(cfg: VaeConfig, style: str = "sampled") -> onnx.ModelProto:
    """``sample`` (batch, in_channels, H, W) pixels in [-1, 1] → the posterior, as ``style`` says:

    * ``sampled``: ``latent_sample = mean + exp(0.5·clip(logvar, -30, 20)) · ε`` with ε drawn in the graph
      by ``RandomNormalLike`` (``latent_dist.sample()``, what diffusers' own ONNX script writes); frame's
      engine hands that op the night's noise, so frame encodes exactly as diffusers does from a seed;
    * ``parameters``: ``latent_parameters``, mean and log-variance stacked (optimum ≥ 1.23);
    * ``mean``: ``latent_sample`` = the mean (``latent_dist.mode()``).
    """
    if style not in ENCODER_STYLES:
        raise ValueError(f"vae_encoder style must be one of {', '.join(ENCODER_STYLES)}, got {style!r}")
    g = GraphBuilder("vae_encoder")
    x = g.input("sample", FLOAT, ["batch_size", cfg.in_channels, "height", "width"])
    moments = encoder_body(g, x, cfg)
    if cfg.use_quant_conv:
        moments = L.conv2d(g, moments, "quant_conv", 2 * cfg.latent_channels, 2 * cfg.latent_channels, 1)
    lat = cfg.latent_channels
    latent_shape = ["batch_size", lat, "height_latent", "width_latent"]
    if style == "parameters":
        g.output(moments, "latent_parameters", FLOAT, ["batch_size", 2 * lat, "height_latent", "width_latent"])
        return g.model("AutoencoderKL encoder, latent_dist.parameters (frame.convert.graphs)")
    mean, logvar = g.op("Split", [moments, g.ints([lat, lat], "halves")], "latent_dist", outputs=2, axis=1)
    if style == "mean":
        g.output(mean, "latent_sample", FLOAT, latent_shape)
        return g.model("AutoencoderKL encoder, latent_dist.mode() (frame.convert.graphs)")
    logvar = g.op("Clip", [logvar, g.const(-30.0, hint="logvar_min"), g.const(20.0, hint="logvar_max")],
                  "latent_dist/logvar")
    std = g.op("Exp", [g.op("Mul", [logvar, g.const(0.5, hint="half")], "latent_dist/half_logvar")], "latent_dist/std")
    noise = g.op("RandomNormalLike", [mean], "latent_dist/noise", dtype=FLOAT)
    sample = g.op("Add", [mean, g.op("Mul", [std, noise], "latent_dist/scaled_noise")], "latent_dist/sample")
    g.output(sample, "latent_sample", FLOAT, latent_shape)
    return g.model("AutoencoderKL encoder, latent_dist.sample() (frame.convert.graphs)")
