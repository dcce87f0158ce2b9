"""The graph builders an import uses: frame's own (``frame.convert.graphs``), one per ONNX folder,
each made from its component's diffusers config. SDXL's pipeline conditions on the penultimate layer
of both text encoders, so those graphs also output every layer's hidden state, as optimum's SDXL
export does."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from frame.convert.checkpoint.configs import SDXL
from frame.convert.graphs import (
    TextEncoderConfig,
    UNetConfig,
    VaeConfig,
    build_text_encoder,
    build_unet,
    build_vae_decoder,
    build_vae_encoder,
)


def frame_builders(family: str) -> dict[str, Callable[[dict], onnx.ModelProto]]:
    """Builder per graph folder for a model of ``family`` (``sd1``, ``sd2``, ``sdxl``)."""
    hidden_states = True if family == SDXL else None

    def text(config: dict, projection: bool) -> onnx.ModelProto:
        return build_text_encoder(TextEncoderConfig.from_transformers(config, projection, hidden_states))

    return {
        "unet": lambda config: build_unet(UNetConfig.from_diffusers(config)),
        "vae_decoder": lambda config: build_vae_decoder(VaeConfig.from_diffusers(config)),
        "vae_encoder": lambda config: build_vae_encoder(VaeConfig.from_diffusers(config)),
        "text_encoder": lambda config: text(config, False),
        "text_encoder_2": lambda config: text(config, True),
    }
