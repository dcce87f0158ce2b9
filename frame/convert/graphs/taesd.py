"""TAESD (madebyollin/taesd, diffusers' ``AutoencoderTiny``): its decoder and encoder as ONNX graphs.

TAESD is a conv + ReLU autoencoder of ~1.2 M parameters per half that reads and writes the *diffusion*
latents of SD (taesd) or SDXL (taesdxl) at a few percent of AutoencoderKL's cost. The graphs mirror
diffusers' ``DecoderTiny`` / ``EncoderTiny`` (``diffusers/models/autoencoders/vae.py``) exactly:

* decoder: ``tanh(z / 3) · 3`` (TAESD's soft clamp), ``layers.0`` conv + ReLU, per stage its
  ``AutoencoderTinyBlock``s, a nearest 2× upsampling and a bias-free 3×3 conv (the last stage's conv
  has a bias and gives the 3 image channels), then ``x · 2 − 1`` into diffusers' [-1, 1] convention;
* encoder: ``(x + 1) / 2`` into TAESD's [0, 1], ``layers.0`` conv, per stage a bias-free stride-2 conv
  (from the second stage on) and its blocks, then a conv to the latent channels.

Inputs and outputs are named as AutoencoderKL's exports (``latent_sample`` → ``sample``; ``sample`` →
``latent_sample``, the deterministic "mean" style), so the pipeline runs either VAE unchanged; the
latents' scaling is the pipeline's (``latents / scaling_factor`` with TAESD's own factor, 1.0).
Initializer names are AutoencoderTiny's state-dict keys (``decoder.layers.3.conv.0.weight``);
``from_taesd_keys`` maps madebyollin's single-file layout (``taesd_decoder.safetensors``: a bare
Sequential whose index 0 is the Clamp, so its indices are one higher than diffusers') onto them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx

from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import FLOAT, GraphBuilder
from frame.errors import FrameError


@dataclass(frozen=True)
class TinyVaeConfig:
    """The AutoencoderTiny config fields the graphs read (diffusers' defaults are TAESD's and TAESDXL's)."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 4
    encoder_block_out_channels: tuple[int, ...] = (64, 64, 64, 64)
    decoder_block_out_channels: tuple[int, ...] = (64, 64, 64, 64)
    num_encoder_blocks: tuple[int, ...] = (1, 3, 3, 3)
    num_decoder_blocks: tuple[int, ...] = (3, 3, 3, 1)
    scaling_factor: float = 1.0

    @classmethod
    def from_diffusers(cls, config: Mapping[str, Any]) -> TinyVaeConfig:
        """From an ``AutoencoderTiny`` ``config.json`` dict; refuses what the graphs do not build."""
        for key, supported in (("act_fn", "relu"), ("upsample_fn", "nearest"), ("upsampling_scaling_factor", 2)):
            if config.get(key, supported) != supported:
                raise FrameError(f"vae config.json: {key} {config[key]!r} is not supported (only {supported!r})")
        fields = {name: config[name] for name in cls.__dataclass_fields__ if name in config}
        try:
            cfg = cls(**{k: tuple(int(x) for x in v) if isinstance(v, list | tuple) else v for k, v in fields.items()})
        except (TypeError, ValueError) as exc:
            raise FrameError(f"vae config.json: {exc}") from None
        for side in ("encoder", "decoder"):
            channels, blocks = getattr(cfg, f"{side}_block_out_channels"), getattr(cfg, f"num_{side}_blocks")
            if not channels or len(channels) != len(blocks) or min(channels) < 1 or min(blocks) < 0:
                raise FrameError(f"vae config.json: {side}_block_out_channels {list(channels)} and "
                                 f"num_{side}_blocks {list(blocks)} do not describe an AutoencoderTiny")
        return cfg


def _block(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int) -> str:
    """``AutoencoderTinyBlock``: ReLU(conv3 · ReLU · conv3 · ReLU · conv3 (x) + skip(x))."""
    h = L.relu(g, L.conv2d(g, x, f"{prefix}.conv.0", cin, cout, 3), f"{prefix}.conv.0")
    h = L.relu(g, L.conv2d(g, h, f"{prefix}.conv.2", cout, cout, 3), f"{prefix}.conv.2")
    h = L.conv2d(g, h, f"{prefix}.conv.4", cout, cout, 3)
    skip = x if cin == cout else L.conv2d(g, x, f"{prefix}.skip", cin, cout, 1, bias=False)
    return L.relu(g, g.op("Add", [h, skip], f"{prefix}/residual"), prefix)


def build_taesd_decoder(cfg: TinyVaeConfig) -> onnx.ModelProto:
    """``latent_sample`` (batch, latent_channels, h, w) → ``sample`` (batch, out_channels, 8h, 8w), [-1, 1]."""
    g = GraphBuilder("vae_decoder")
    z = g.input("latent_sample", FLOAT, ["batch_size", cfg.latent_channels, "height_latent", "width_latent"])
    z = g.op("Div", [z, g.const(3.0, hint="three")], "decoder/clamp_in")
    z = g.op("Mul", [g.op("Tanh", [z], "decoder/clamp_tanh"), g.const(3.0, hint="three")], "decoder/clamp")
    channels, blocks = cfg.decoder_block_out_channels, cfg.num_decoder_blocks
    x = L.relu(g, L.conv2d(g, z, "decoder.layers.0", cfg.latent_channels, channels[0], 3), "decoder.layers.1")
    index = 2
    for i, (width, count) in enumerate(zip(channels, blocks)):
        for _ in range(count):
            x = _block(g, x, f"decoder.layers.{index}", width, width)
            index += 1
        last = i == len(channels) - 1
        if not last:
            x = L.upsample_nearest(g, x, f"decoder.layers.{index}")
            index += 1
        x = L.conv2d(g, x, f"decoder.layers.{index}", width, cfg.out_channels if last else width, 3, bias=last)
        index += 1
    x = g.op("Sub", [g.op("Mul", [x, g.const(2.0, hint="two")], "decoder/times_two"), g.const(1.0, hint="one")],
             "decoder/to_signed")
    g.output(x, "sample", FLOAT, ["batch_size", cfg.out_channels, "height", "width"])
    return g.model("AutoencoderTiny decoder (frame.convert.graphs)")


def build_taesd_encoder(cfg: TinyVaeConfig) -> onnx.ModelProto:
    """``sample`` (batch, in_channels, H, W) in [-1, 1] → ``latent_sample`` (batch, latent_channels, H/8, W/8)."""
    g = GraphBuilder("vae_encoder")
    x = g.input("sample", FLOAT, ["batch_size", cfg.in_channels, "height", "width"])
    x = g.op("Div", [g.op("Add", [x, g.const(1.0, hint="one")], "encoder/plus_one"), g.const(2.0, hint="two")],
             "encoder/to_unit")
    channels, blocks = cfg.encoder_block_out_channels, cfg.num_encoder_blocks
    index = 0
    for i, (width, count) in enumerate(zip(channels, blocks)):
        if i == 0:
            x = L.conv2d(g, x, f"encoder.layers.{index}", cfg.in_channels, width, 3)
        else:
            x = L.conv2d(g, x, f"encoder.layers.{index}", width, width, 3, stride=2, bias=False)
        index += 1
        for _ in range(count):
            x = _block(g, x, f"encoder.layers.{index}", width, width)
            index += 1
    x = L.conv2d(g, x, f"encoder.layers.{index}", channels[-1], cfg.latent_channels, 3)
    g.output(x, "latent_sample", FLOAT, ["batch_size", cfg.latent_channels, "height_latent", "width_latent"])
    return g.model("AutoencoderTiny encoder (frame.convert.graphs)")


_BARE_KEY = re.compile(r"(\d+)\.(.+)")


def from_taesd_keys(keys: list[str], side: str) -> dict[str, str]:
    """madebyollin's single-file key → AutoencoderTiny's, for ``side`` "decoder" or "encoder".

    ``taesd_decoder.safetensors`` is ``nn.Sequential(Clamp(), conv, ReLU, Block, …)``: index ``n`` is
    diffusers' ``decoder.layers.{n - 1}`` (diffusers' convert_tiny_autoencoder_to_diffusers.py); the encoder
    has no Clamp, so its indices are diffusers' own. Keys already in diffusers' layout pass unchanged.
    """
    if side not in ("decoder", "encoder"):
        raise ValueError(f"side must be decoder or encoder, got {side!r}")
    shift = 1 if side == "decoder" else 0
    out: dict[str, str] = {}
    for key in keys:
        if key.startswith(f"{side}.layers."):
            out[key] = key
            continue
        match = _BARE_KEY.fullmatch(key)
        if match is None or int(match.group(1)) < shift:
            raise FrameError(f"taesd {side}: tensor {key[:80]!r} is not a TAESD {side} weight")
        out[key] = f"{side}.layers.{int(match.group(1)) - shift}.{match.group(2)}"
    return out
