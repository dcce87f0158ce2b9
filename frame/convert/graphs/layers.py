"""The building blocks: torch.nn layers as ONNX nodes, in the layouts the engine's passes fuse.

Every function takes the builder, its input value(s) and the state-dict prefix of its module
(``down_blocks.0.resnets.0.conv1``), declares the module's weights under ``prefix.weight`` /
``prefix.bias`` with torch's shapes and returns the output value's name. Layouts, chosen for what
``frame.engine.passes`` matches (so streaming memory stays what it is with optimum's exports):

* ``linear``: ``Gemm(x, W, b, transB=1)`` on a 2-D (tokens, features) matrix. torch stores a Linear
  weight as (out, in); Gemm reads it as it is stored, so the initializer keeps the state-dict shape,
  and the engine decodes fp16/uint8 weights in blocks of rows (output channels) for it. Token
  matrices are kept 2-D between layers (``tokens``), 4-D only around the attention heads.
* ``group_norm``: ``Reshape(x, [0, G, -1]) → InstanceNormalization → Reshape(·, Shape(x)) → Mul(γ) →
  Add(β)``, γ and β unsqueezed to (C, 1, 1): the engine's GroupNorm → [SiLU] → Conv fusion.
* ``silu``: ``Mul(x, Sigmoid(x))``; ``gelu``: the exact erf form with Constant scalars; both fused.
* ``attention_core``: ``MatMul(Q, Kᵀ) → Mul(scale) → [Add(mask)] → Softmax(-1) → MatMul(·, V)``, the
  chain the engine replaces by sliced attention (no heads × N × N scores).
* ``upsample_nearest`` then a 3×3 conv: ``Resize(nearest, asymmetric, floor, scales 2)`` → ``Conv``,
  the engine's UpsampleConv pair.
"""

from __future__ import annotations

import math

import numpy as np

from frame.convert.graphs.builder import GraphBuilder


# ---------------------------------------------------------------------- convolutions and norms
def conv2d(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int, kernel: int, stride: int = 1,
           pads: tuple[int, int, int, int] | None = None, bias: bool = True) -> str:
    """torch.nn.Conv2d; ``pads`` (top, left, bottom, right) default to ``kernel // 2`` all round."""
    p = kernel // 2
    top, left, bottom, right = pads if pads is not None else (p, p, p, p)
    inputs = [x, g.weight(f"{prefix}.weight", (cout, cin, kernel, kernel))]
    if bias:
        inputs.append(g.weight(f"{prefix}.bias", (cout,)))
    return g.op("Conv", inputs, prefix, kernel_shape=[kernel, kernel], strides=[stride, stride],
                pads=[top, left, bottom, right], dilations=[1, 1], group=1)


def _per_channel(g: GraphBuilder, name: str) -> str:
    """A (C,) weight as (C, 1, 1), broadcasting over (N, C, H, W)."""
    return g.op("Unsqueeze", [name, g.ints([1, 2], "axes_hw")], f"{name}/chw")


def group_norm(g: GraphBuilder, x: str, prefix: str, channels: int, groups: int, eps: float) -> str:
    """torch.nn.GroupNorm with affine weights, on (N, C, H, W)."""
    if channels % groups:
        raise ValueError(f"{prefix}: {channels} channels do not split into {groups} groups")
    # γ and β (C, 1, 1) before the chain, next to the weights they come from (any valid order runs)
    gamma = _per_channel(g, g.weight(f"{prefix}.weight", (channels,)))
    beta = _per_channel(g, g.weight(f"{prefix}.bias", (channels,)))
    grouped = g.op("Reshape", [x, g.ints([0, groups, -1])], f"{prefix}/grouped")
    normed = g.op("InstanceNormalization", [grouped, g.const(np.ones(groups, np.float32), hint="ones"),
                                            g.const(np.zeros(groups, np.float32), hint="zeros")],
                  f"{prefix}/normed", epsilon=float(eps))
    back = g.op("Reshape", [normed, g.op("Shape", [x], f"{prefix}/shape")], f"{prefix}/ungrouped")
    return g.op("Add", [g.op("Mul", [back, gamma], f"{prefix}/scaled"), beta], prefix)


def layer_norm(g: GraphBuilder, x: str, prefix: str, width: int, eps: float) -> str:
    """torch.nn.LayerNorm over the last axis."""
    return g.op("LayerNormalization", [x, g.weight(f"{prefix}.weight", (width,)), g.weight(f"{prefix}.bias", (width,))],
                prefix, axis=-1, epsilon=float(eps))


# ---------------------------------------------------------------------- activations
def silu(g: GraphBuilder, x: str, hint: str) -> str:
    return g.op("Mul", [x, g.op("Sigmoid", [x], f"{hint}/sigmoid")], f"{hint}/silu")


def gelu(g: GraphBuilder, x: str, hint: str) -> str:
    """Exact GELU, ``x · 0.5 · (1 + erf(x / √2))``, as the exporters write it."""
    t = g.op("Div", [x, g.const(math.sqrt(2.0), hint="sqrt2")], f"{hint}/scaled")
    t = g.op("Erf", [t], f"{hint}/erf")
    t = g.op("Add", [t, g.const(1.0, hint="one")], f"{hint}/erf_plus_one")
    t = g.op("Mul", [x, t], f"{hint}/times_x")
    return g.op("Mul", [t, g.const(0.5, hint="half")], f"{hint}/gelu")


def quick_gelu(g: GraphBuilder, x: str, hint: str) -> str:
    """OpenAI CLIP's ``x · sigmoid(1.702 x)``."""
    scaled = g.op("Mul", [x, g.const(1.702, hint="quick_gelu_k")], f"{hint}/scaled")
    return g.op("Mul", [x, g.op("Sigmoid", [scaled], f"{hint}/sigmoid")], f"{hint}/quick_gelu")


def relu(g: GraphBuilder, x: str, hint: str) -> str:
    """torch.nn.ReLU (TAESD's blocks)."""
    return g.op("Relu", [x], f"{hint}/relu")


ACTIVATIONS = {"silu": silu, "swish": silu, "gelu": gelu, "quick_gelu": quick_gelu, "relu": relu}


def activation(g: GraphBuilder, name: str, x: str, hint: str) -> str:
    if name not in ACTIVATIONS:
        raise ValueError(f"unsupported activation {name!r} (supported: {', '.join(sorted(ACTIVATIONS))})")
    return ACTIVATIONS[name](g, x, hint)


# ---------------------------------------------------------------------- linear layers on token matrices
def linear(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int, bias: bool = True) -> str:
    """torch.nn.Linear on a 2-D (tokens, cin) matrix."""
    inputs = [x, g.weight(f"{prefix}.weight", (cout, cin))]
    if bias:
        inputs.append(g.weight(f"{prefix}.bias", (cout,)))
    return g.op("Gemm", inputs, prefix, transB=1)


def geglu(g: GraphBuilder, x: str, prefix: str, cin: int, inner: int) -> str:
    """diffusers' GEGLU: ``proj`` to 2·inner, ``hidden · gelu(gate)`` of its two halves."""
    projected = linear(g, x, f"{prefix}.proj", cin, 2 * inner)
    hidden = g.op("Slice", [projected, g.ints([0]), g.ints([inner]), g.ints([1])], f"{prefix}/hidden")
    gate = g.op("Slice", [projected, g.ints([inner]), g.ints([2 * inner]), g.ints([1])], f"{prefix}/gate")
    return g.op("Mul", [hidden, gelu(g, gate, f"{prefix}/gate")], f"{prefix}/geglu")


def feed_forward(g: GraphBuilder, x: str, prefix: str, width: int, inner: int) -> str:
    """diffusers' FeedForward with GEGLU (``net.0`` the GEGLU, ``net.2`` the output Linear)."""
    h = geglu(g, x, f"{prefix}.net.0", width, inner)
    return linear(g, h, f"{prefix}.net.2", inner, width)


def batch_of(g: GraphBuilder, x: str) -> str:
    """(1,) int64: the leading dimension of ``x``."""
    return g.op("Shape", [x], f"{x}/batch", start=0, end=1)


def heads_shape(g: GraphBuilder, batch: str, heads: int, head_dim: int) -> str:
    return g.op("Concat", [batch, g.ints([-1, heads, head_dim])], f"heads_{heads}x{head_dim}", axis=0)


def split_heads(g: GraphBuilder, x: str, shape: str, transposed: bool) -> str:
    """(B·N, H·d) → (B, H, N, d), or (B, H, d, N) when ``transposed`` (the keys of Q·Kᵀ)."""
    four = g.op("Reshape", [x, shape], f"{x}/heads")
    return g.op("Transpose", [four], f"{x}/{'kt' if transposed else 'bhnd'}",
                perm=[0, 2, 3, 1] if transposed else [0, 2, 1, 3])


def attention_core(g: GraphBuilder, q: str, k: str, v: str, prefix: str, batch: str, heads: int, head_dim: int,
                   mask: str | None = None) -> str:
    """softmax(Q·Kᵀ/√d [+ mask]) · V over ``heads`` heads; in and out (B·N, H·d) token matrices."""
    shape = heads_shape(g, batch, heads, head_dim)
    qh, kt, vh = split_heads(g, q, shape, False), split_heads(g, k, shape, True), split_heads(g, v, shape, False)
    scores = g.op("MatMul", [qh, kt], f"{prefix}/scores")
    scores = g.op("Mul", [scores, g.const(1.0 / math.sqrt(head_dim), hint=f"scale_{head_dim}")], f"{prefix}/scaled")
    if mask is not None:
        scores = g.op("Add", [scores, mask], f"{prefix}/masked")
    probs = g.op("Softmax", [scores], f"{prefix}/probs", axis=-1)
    out = g.op("MatMul", [probs, vh], f"{prefix}/context")
    out = g.op("Transpose", [out], f"{prefix}/bnhd", perm=[0, 2, 1, 3])
    return g.op("Reshape", [out, g.ints([-1, heads * head_dim])], f"{prefix}/merged")


def attention(g: GraphBuilder, x: str, context: str | None, prefix: str, batch: str, width: int, context_width: int,
              heads: int, qkv_bias: bool = False, mask: str | None = None) -> str:
    """diffusers' ``Attention`` (to_q, to_k, to_v, to_out.0) on token matrices; ``context`` None: self."""
    if width % heads:
        raise ValueError(f"{prefix}: {width} channels do not split into {heads} heads")
    source, source_width = (x, width) if context is None else (context, context_width)
    q = linear(g, x, f"{prefix}.to_q", width, width, qkv_bias)
    k = linear(g, source, f"{prefix}.to_k", source_width, width, qkv_bias)
    v = linear(g, source, f"{prefix}.to_v", source_width, width, qkv_bias)
    out = attention_core(g, q, k, v, prefix, batch, heads, width // heads, mask)
    return linear(g, out, f"{prefix}.to_out.0", width, width)


# ---------------------------------------------------------------------- images <-> token matrices
def to_tokens(g: GraphBuilder, x: str, channels: int, hint: str) -> str:
    """(B, C, H, W) → (B·H·W, C)."""
    nhwc = g.op("Transpose", [x], f"{hint}/nhwc", perm=[0, 2, 3, 1])
    return g.op("Reshape", [nhwc, g.ints([-1, channels])], f"{hint}/tokens")


def from_tokens(g: GraphBuilder, tokens: str, like: str, channels: int, hint: str) -> str:
    """(B·H·W, C) → (B, C, H, W), H and W those of the image ``like``."""
    dims = g.op("Shape", [like], f"{hint}/like_shape")
    bhw = g.op("Gather", [dims, g.ints([0, 2, 3], "bhw")], f"{hint}/bhw", axis=0)
    target = g.op("Concat", [bhw, g.ints([channels])], f"{hint}/nhwc_shape", axis=0)
    nhwc = g.op("Reshape", [tokens, target], f"{hint}/nhwc")
    return g.op("Transpose", [nhwc], f"{hint}/nchw", perm=[0, 3, 1, 2])


# ---------------------------------------------------------------------- resampling
def upsample_nearest(g: GraphBuilder, x: str, hint: str) -> str:
    """F.interpolate(x, scale_factor=2, mode="nearest")."""
    scales = g.const([1.0, 1.0, 2.0, 2.0], hint="scales_2x")
    return g.op("Resize", [x, "", scales], f"{hint}/upsampled", mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def upsample(g: GraphBuilder, x: str, prefix: str, channels: int) -> str:
    """diffusers' Upsample2D with its conv (``prefix.conv``)."""
    return conv2d(g, upsample_nearest(g, x, prefix), f"{prefix}.conv", channels, channels, 3)


def downsample(g: GraphBuilder, x: str, prefix: str, channels: int, padding: int) -> str:
    """diffusers' Downsample2D: a stride-2 3×3 conv; ``padding`` 0 pads only bottom and right by one (the
    VAE encoder's ``F.pad(x, (0, 1, 0, 1))``)."""
    pads = (padding, padding, padding, padding) if padding else (0, 0, 1, 1)
    return conv2d(g, x, f"{prefix}.conv", channels, channels, 3, stride=2, pads=pads)
