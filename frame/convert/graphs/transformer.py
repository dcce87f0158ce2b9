"""diffusers' Transformer2DModel with its BasicTransformerBlocks: the UNet's spatial transformer.

``GroupNorm → proj_in → (self-attention, cross-attention, GEGLU feed-forward, each pre-LayerNorm
with its residual) × layers → proj_out``, plus the block's input. ``proj_in``/``proj_out`` are 1×1
convs (SD 1.x) or Linears on the token matrix (``use_linear_projection``: SD 2.x, SDXL). Between them
the image is a (B·H·W, C) token matrix, so every Linear is one Gemm; the cross-attention's keys and
values read the text states as a (B·T, D) matrix made once per graph (``Context``).
"""

from __future__ import annotations

from dataclasses import dataclass

from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import GraphBuilder

GROUP_NORM_EPS = 1e-6  # Transformer2DModel's norm
LAYER_NORM_EPS = 1e-5  # BasicTransformerBlock's norm1..3


@dataclass(frozen=True)
class Context:
    """What every transformer of one UNet shares: the batch size and the text states as a matrix."""

    batch: str
    states: str  # (B·T, cross_attention_dim)
    width: int


def basic_block(g: GraphBuilder, h: str, prefix: str, width: int, heads: int, context: Context) -> str:
    """BasicTransformerBlock (layer_norm type, GEGLU feed-forward of 4·width)."""
    x = L.layer_norm(g, h, f"{prefix}.norm1", width, LAYER_NORM_EPS)
    h = g.op("Add", [L.attention(g, x, None, f"{prefix}.attn1", context.batch, width, width, heads), h],
             f"{prefix}/self_attended")
    x = L.layer_norm(g, h, f"{prefix}.norm2", width, LAYER_NORM_EPS)
    h = g.op("Add", [L.attention(g, x, context.states, f"{prefix}.attn2", context.batch, width, context.width,
                                 heads), h], f"{prefix}/cross_attended")
    x = L.layer_norm(g, h, f"{prefix}.norm3", width, LAYER_NORM_EPS)
    return g.op("Add", [L.feed_forward(g, x, f"{prefix}.ff", width, 4 * width), h], f"{prefix}/out")


def transformer_2d(g: GraphBuilder, x: str, prefix: str, channels: int, heads: int, layers: int, groups: int,
                   linear_projection: bool, context: Context) -> str:
    """Transformer2DModel on (B, C, H, W), returning (B, C, H, W)."""
    h = L.group_norm(g, x, f"{prefix}.norm", channels, groups, GROUP_NORM_EPS)
    if linear_projection:
        tokens = L.linear(g, L.to_tokens(g, h, channels, prefix), f"{prefix}.proj_in", channels, channels)
    else:
        tokens = L.to_tokens(g, L.conv2d(g, h, f"{prefix}.proj_in", channels, channels, 1), channels, prefix)
    for i in range(layers):
        tokens = basic_block(g, tokens, f"{prefix}.transformer_blocks.{i}", channels, heads, context)
    if linear_projection:
        out = L.from_tokens(g, L.linear(g, tokens, f"{prefix}.proj_out", channels, channels), x, channels, prefix)
    else:
        out = L.conv2d(g, L.from_tokens(g, tokens, x, channels, prefix), f"{prefix}.proj_out", channels, channels, 1)
    return g.op("Add", [out, x], f"{prefix}/out")
