"""The pass list: every load-time rewrite in the order ``Model`` runs them, and why each sits there.

``run_passes`` runs them after constant folding and before planning, and returns how many rewrites
each made (``Model.rewrites``, in the load log). Adding a pass: write ``fuse_x(nodes, ...) -> (nodes,
count)`` in a module of this package, add one ``Pass`` where its ``why`` holds, and read its count as
``model.rewrites["x"]`` in its test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from frame.engine.graph import Node, remove_dead_nodes
from frame.engine.io.weights import WeightRef
from frame.engine.passes.attention import fuse_attention
from frame.engine.passes.conv_affine import fuse_conv_affine
from frame.engine.passes.geglu import fuse_geglu
from frame.engine.passes.gelu import commute_for_reuse, fuse_gelu
from frame.engine.passes.hoist_narrowing import hoist_narrowing_convs
from frame.engine.passes.layer_norm import fuse_layer_norm
from frame.engine.passes.norm_conv import fuse_norm_conv
from frame.engine.passes.silu import fuse_silu
from frame.engine.passes.sliced_attention import AttentionConfig
from frame.engine.passes.upsample_conv import fuse_upsample_conv
from frame.engine.passes.weight_decoding import fuse_weight_decoding


@dataclass(frozen=True)
class PassContext:
    """What a pass may read besides the nodes: graph inputs and outputs, the weights, attention settings."""

    inputs: set[str]
    outputs: set[str]
    weights: dict[str, WeightRef]
    attention: AttentionConfig
    opset: int  # the default-domain opset (Softmax's axis semantics changed at 13)


@dataclass(frozen=True)
class Pass:
    """One rewrite: ``run(nodes, context) -> (nodes, count)``. ``counted``: its count is reported."""

    name: str
    run: Callable[[list[Node], PassContext], tuple[list[Node], int]]
    why: str
    counted: bool = True


def _dead_nodes(nodes: list[Node], ctx: PassContext) -> tuple[list[Node], int]:
    kept = remove_dead_nodes(nodes, ctx.outputs)
    return kept, len(nodes) - len(kept)


def _commute(nodes: list[Node], ctx: PassContext) -> tuple[list[Node], int]:
    return nodes, commute_for_reuse(nodes, ctx.weights, ctx.inputs, ctx.outputs)


PASSES: tuple[Pass, ...] = (
    Pass("attention", lambda n, c: fuse_attention(n, c.outputs, c.attention, c.opset),
         "first: its MatMul/Softmax chains must be whole, before other fusions take their parts"),
    Pass("silu", lambda n, c: fuse_silu(n, c.outputs), "Sigmoid·Mul pairs into the SiLU node norm_conv matches"),
    Pass("layer_norm", lambda n, c: fuse_layer_norm(n, c.outputs, c.weights),
         "before weight_decoding, like every fusion that reads float32 initializers"),
    Pass("upsample_conv", lambda n, c: fuse_upsample_conv(n, c.outputs, c.weights),
         "before conv_affine and norm_conv: a Resize → Conv pair's conv is taken here first"),
    Pass("conv_affine", lambda n, c: fuse_conv_affine(n, c.outputs, c.weights),
         "Conv → per-channel affine; takes float32 initializer weights only"),
    Pass("norm_conv", lambda n, c: fuse_norm_conv(n, c.outputs, c.weights),
         "GroupNorm → [SiLU] → Conv, after the SiLU fusion it reads"),
    Pass("weight_decoding", lambda n, c: fuse_weight_decoding(n, c.outputs, c.weights),
         "after conv_affine, which only takes float32 initializers: quantized/fp16 convs keep their "
         "BatchNormalization and get their weights decoded per block instead"),
    Pass("geglu", lambda n, c: fuse_geglu(n, c.outputs, c.weights), "after weight_decoding: it reads decoded weights"),
    Pass("gelu", lambda n, c: fuse_gelu(n, c.outputs, c.weights),
         "after GEGLU: a feed-forward it runs in channel blocks never exists whole (its memory), the other "
         "GELUs become one blocked node (their time)"),
    Pass("dead_nodes", _dead_nodes, "the leftovers of the fusions above", counted=False),
    Pass("commute", _commute, "operand order for in-place Add/Mul, on the final node list", counted=False),
    Pass("hoist_narrowing", lambda n, c: hoist_narrowing_convs(n, c.weights, c.inputs),
         "last: a reordering of the final nodes, so every fused node is already in place"),
)


def run_passes(nodes: list[Node], ctx: PassContext) -> tuple[list[Node], dict[str, int]]:
    """``nodes`` after every pass in order, and the count of each counted pass by name."""
    counts: dict[str, int] = {}
    for p in PASSES:
        nodes, count = p.run(nodes, ctx)
        if p.counted:
            counts[p.name] = count
    return nodes, counts
