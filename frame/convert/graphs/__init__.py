"""ONNX graphs of the Stable Diffusion components, built from their configs (no torch, no templates).

``frame model import`` turns a checkpoint into the diffusers ONNX layout: this package builds each
component's graph for the detected config, with initializers named by the diffusers/transformers
state-dict keys and no data; the importer streams the tensors in. Inputs and outputs are named and
shaped as optimum's export names them, so frame's pipeline (and onnxruntime) run them unchanged.
Layers (``layers``, ``blocks``) are written in the node layouts the engine's fusion passes match
(docs/model-graphs.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.convert.graphs.configs import TextEncoderConfig, UNetConfig, VaeConfig
    from frame.convert.graphs.taesd import TinyVaeConfig, build_taesd_decoder, build_taesd_encoder
    from frame.convert.graphs.text import build_text_encoder
    from frame.convert.graphs.unet import build_unet
    from frame.convert.graphs.vae import build_vae_decoder, build_vae_encoder
    from frame.convert.graphs.weights import attach_weights, weight_specs

__all__ = ["TextEncoderConfig", "TinyVaeConfig", "UNetConfig", "VaeConfig", "attach_weights", "build_taesd_decoder",
           "build_taesd_encoder", "build_text_encoder", "build_unet", "build_vae_decoder", "build_vae_encoder",
           "weight_specs"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "TextEncoderConfig": "frame.convert.graphs.configs",
    "UNetConfig": "frame.convert.graphs.configs",
    "VaeConfig": "frame.convert.graphs.configs",
    "TinyVaeConfig": "frame.convert.graphs.taesd",
    "build_taesd_decoder": "frame.convert.graphs.taesd",
    "build_taesd_encoder": "frame.convert.graphs.taesd",
    "build_unet": "frame.convert.graphs.unet",
    "build_text_encoder": "frame.convert.graphs.text",
    "build_vae_decoder": "frame.convert.graphs.vae",
    "build_vae_encoder": "frame.convert.graphs.vae",
    "attach_weights": "frame.convert.graphs.weights",
    "weight_specs": "frame.convert.graphs.weights",
})
