"""Load-time rewrite: LayerNorm as exported before opset 17 → one ``LayerNormalization`` node.

Opset 14 (optimum's SDXL exports) has no LayerNormalization, so every LayerNorm arrives as
``ReduceMean → Sub → Pow(2) → ReduceMean → Add(ε) → Sqrt → Div`` followed by the affine
``Mul(γ) → Add(β)``: seven passes over the activation and three activation-sized temporaries for the
210 LayerNorms of an SDXL UNet evaluation (1.2 CPU-s and a quarter of a million page faults). The
fused node runs the engine's LayerNormalization kernel (one centring pass, the variance as a dot
product, the scale and bias in place). Matched only when the reductions are over the last axis
(``axes=[-1]``, keepdims) and ε and the exponent are inline constants; γ and β are fused when they
follow as a Mul and an Add by 1-D initializers, otherwise the kernel gets scale 1 and no bias.
"""

from __future__ import annotations

import numpy as np

from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.ops.cost import passes
from frame.engine.ops.norm import layer_normalization
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.pattern import GraphIndex, Rewrite

DOMAIN = "frame.engine"


def fused_layer_norm(x: np.ndarray, scale: np.ndarray | None = None, bias: np.ndarray | None = None, /, *,
                  epsilon: float) -> np.ndarray:
    if scale is None:
        scale = np.ones(x.shape[-1], x.dtype)
    return layer_normalization(x, scale, bias, axis=-1, epsilon=epsilon)


COST = passes(3.5)  # as the ONNX LayerNormalization
SPEC = OpSpec("LayerNormalization", 1, fused_layer_norm, DOMAIN, cost=COST)


def _last_axis_mean(node: Node, index: GraphIndex) -> bool:
    if node.op_type != "ReduceMean" or node.domain or not node.attrs.get("keepdims", 1):
        return False
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1:  # opset 18: axes as an input
        value = index.inline(node.inputs[1])
        axes = None if value is None else list(value.reshape(-1))
    return axes is not None and list(axes) == [-1]


def _vector(index: GraphIndex, node: Node, name: str) -> bool:
    """``node`` is (name, w) with w a 1-D initializer (after commuting, the activation comes first)."""
    if len(node.inputs) != 2 or node.inputs[0] != name:
        return False
    ref = index.weights.get(node.inputs[1])
    return ref is not None and len(ref.shape) == 1


def _match(index: GraphIndex, first: int) -> tuple[list[int], str, float, str, str] | None:
    """(matched indices, x, epsilon, scale name, bias name) for the LayerNorm starting at ``first``."""
    nodes = index.nodes
    if not _last_axis_mean(nodes[first], index):
        return None
    x, mean = nodes[first].inputs[0], nodes[first].outputs[0]
    sub = index.sole_reader(mean, "Sub")
    if sub is None or nodes[sub].inputs != [x, mean]:
        return None
    centred = nodes[sub].outputs[0]
    users = index.internal_readers(centred)
    if len(users) != 2:
        return None
    pow_at = next((u for u in users if nodes[u].op_type == "Pow"), None)
    div_at = next((u for u in users if nodes[u].op_type == "Div"), None)
    if pow_at is None or div_at is None or nodes[pow_at].inputs[0] != centred \
            or index.scalar(nodes[pow_at].inputs[1]) != 2.0:
        return None
    var_at = index.sole_reader(nodes[pow_at].outputs[0], "ReduceMean")
    if var_at is None or not _last_axis_mean(nodes[var_at], index):
        return None
    add_at = index.sole_reader(nodes[var_at].outputs[0], "Add")
    eps = None if add_at is None else index.scalar(nodes[add_at].inputs[1])
    sqrt_at = None if eps is None else index.sole_reader(nodes[add_at].outputs[0], "Sqrt")
    if sqrt_at is None or nodes[div_at].inputs != [centred, nodes[sqrt_at].outputs[0]] \
            or index.sole_reader(nodes[sqrt_at].outputs[0]) != div_at:
        return None
    chain = [first, sub, pow_at, var_at, add_at, sqrt_at, div_at]
    scale = bias = ""
    mul_at = index.sole_reader(nodes[div_at].outputs[0], "Mul")
    if mul_at is not None and _vector(index, nodes[mul_at], nodes[div_at].outputs[0]):
        chain.append(mul_at)
        scale = nodes[mul_at].inputs[1]
        plus_at = index.sole_reader(nodes[mul_at].outputs[0], "Add")
        if plus_at is not None and _vector(index, nodes[plus_at], nodes[mul_at].outputs[0]):
            chain.append(plus_at)
            bias = nodes[plus_at].inputs[1]
    return chain, x, eps, scale, bias


def fuse_layer_norm(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
                    ) -> tuple[list[Node], int]:
    """``nodes`` with every decomposed LayerNorm as one node, and the count."""
    for node in nodes:  # Mul(γ, x) / Add(β, x) written weight first: look at both orders
        if node.op_type in ("Mul", "Add") and not node.domain and len(node.inputs) == 2 \
                and node.inputs[0] in weights and node.inputs[1] not in weights:
            node.inputs = node.inputs[::-1]
    index, rewrite = GraphIndex(nodes, graph_outputs, weights), Rewrite(nodes)
    for i, node in enumerate(nodes):
        if node.op_type != "ReduceMean" or i in rewrite.removed:
            continue
        found = _match(index, i)
        if found is None or rewrite.removed.intersection(found[0]):
            continue
        chain, x, eps, scale, bias = found
        last = nodes[chain[-1]]
        inputs = [x, scale, bias]
        while inputs[-1] == "":
            inputs.pop()
        fused = Node(f"{last.name}/layer_norm", "LayerNormalization", DOMAIN, inputs, list(last.outputs),
                     {"epsilon": eps}, SPEC)
        rewrite.fuse(chain[-1], fused, chain[:-1])
    return rewrite.result(), rewrite.count
