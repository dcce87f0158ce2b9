"""diffusers' composite modules shared by the UNet and the VAE: ResnetBlock2D, the VAE's spatial
self-attention, and the sinusoidal timestep embedding with its MLP.

Each follows the diffusers module's ``forward`` (``diffusers/models/resnet.py``, ``attention_processor.py``,
``embeddings.py``) for the configurations SD checkpoints use: ``resnet_time_scale_shift="default"``,
``output_scale_factor=1``, no up/down sampling inside the resnet.
"""

from __future__ import annotations

import math

import numpy as np

from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import GraphBuilder


def resnet(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int, groups: int, eps: float,
           temb: str | None = None, temb_channels: int = 0) -> str:
    """ResnetBlock2D: norm1 → SiLU → conv1 [+ time_emb_proj(SiLU(temb))] → norm2 → SiLU → conv2, plus the
    input (through ``conv_shortcut`` when the channels change). ``temb`` is SiLU(temb) already, shared."""
    h = L.group_norm(g, x, f"{prefix}.norm1", cin, groups, eps)
    h = L.conv2d(g, L.silu(g, h, f"{prefix}.norm1"), f"{prefix}.conv1", cin, cout, 3)
    if temb is not None:
        t = L.linear(g, temb, f"{prefix}.time_emb_proj", temb_channels, cout)
        t = g.op("Unsqueeze", [t, g.ints([2, 3], "axes_23")], f"{prefix}.time_emb_proj/nchw")
        h = g.op("Add", [h, t], f"{prefix}/with_time")
    h = L.group_norm(g, h, f"{prefix}.norm2", cout, groups, eps)
    h = L.conv2d(g, L.silu(g, h, f"{prefix}.norm2"), f"{prefix}.conv2", cout, cout, 3)
    shortcut = L.conv2d(g, x, f"{prefix}.conv_shortcut", cin, cout, 1) if cin != cout else x
    return g.op("Add", [shortcut, h], f"{prefix}/out")


def spatial_attention(g: GraphBuilder, x: str, prefix: str, channels: int, groups: int, eps: float,
                      head_dim: int | None = None) -> str:
    """The VAE mid block's ``Attention`` with its group norm (``residual_connection``, one head of all
    channels unless ``head_dim`` says): x + to_out(attention(group_norm(x))) over the H·W positions."""
    heads = 1 if head_dim is None else channels // head_dim
    h = L.group_norm(g, x, f"{prefix}.group_norm", channels, groups, eps)
    tokens = L.to_tokens(g, h, channels, prefix)
    out = L.attention(g, tokens, None, prefix, L.batch_of(g, x), channels, channels, heads, qkv_bias=True)
    return g.op("Add", [L.from_tokens(g, out, x, channels, prefix), x], f"{prefix}/out")


def sinusoidal(g: GraphBuilder, t: str, dim: int, flip_sin_to_cos: bool, shift: float, hint: str) -> str:
    """diffusers' ``get_timestep_embedding``: (N,) float timesteps → (N, dim).

    The frequencies are computed as torch computes them (float32 ``-ln(10000) · arange / (half - shift)``,
    then ``exp``), so the angles agree to the bit where it matters: at t ≈ 1000 an ulp of a frequency
    is 1e-4 of a radian.
    """
    half = dim // 2
    exponent = np.float32(-math.log(10000)) * np.arange(half, dtype=np.float32)
    frequencies = np.exp(exponent / np.float32(half - shift)).astype(np.float32)
    angles = g.op("Mul", [g.op("Unsqueeze", [t, g.ints([1], "axis_1")], f"{hint}/column"),
                          g.const(frequencies[None, :], hint=f"{hint}/frequencies")], f"{hint}/angles")
    sin, cos = g.op("Sin", [angles], f"{hint}/sin"), g.op("Cos", [angles], f"{hint}/cos")
    parts = [cos, sin] if flip_sin_to_cos else [sin, cos]
    if dim % 2:
        zeros = g.op("Mul", [g.op("Slice", [angles, g.ints([0]), g.ints([1]), g.ints([1])], f"{hint}/first"),
                             g.const(0.0, hint="zero")], f"{hint}/pad")
        parts.append(zeros)
    return g.op("Concat", parts, hint, axis=-1)


def timestep_mlp(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int, act: str = "silu") -> str:
    """TimestepEmbedding: linear_1 → act → linear_2."""
    h = L.linear(g, x, f"{prefix}.linear_1", cin, cout)
    return L.linear(g, L.activation(g, act, h, f"{prefix}.act"), f"{prefix}.linear_2", cout, cout)
