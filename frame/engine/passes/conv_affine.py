"""Load-time rewrite: Conv followed by per-channel affine ops → one ``ConvAffine`` step.

Exports of convolutional networks follow most convs with an inference-mode BatchNormalization, or
with its folded form as a per-channel ``Mul`` and ``Add`` by constants (PaddlePaddle writes
``Conv → Mul(scale) → Add(shift)``). onnxruntime folds these at load; run as written they cost a
kernel call and two to four passes over the activation each. Here the chain
``Conv → (BatchNormalization | Mul by c | Add c)*`` — every intermediate read only by the next
node, every ``c`` a weight that broadcasts per output channel — becomes one step: the chain is
reduced to a per-channel scale ``s`` and shift ``t`` (BatchNormalization: ``s = γ/√(var+ε)``,
``t = β − mean·s``), and the conv runs with weight ``W·s`` and bias ``b·s + t``.

The numbers are folded when the step runs, not at load: the weights stay streamed (fetched just
before the step, released after) like any other, so the rewrite costs no memory, and the fold is a
pass over the conv weight, smaller than the passes over the activation it replaces (when the weight
is the larger of the two, as in late layers of small images, the output is scaled instead).
ConvTranspose chains scale the output.
"""

from __future__ import annotations

import logging

import numpy as np

from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.ops.conv import conv, conv_scratch, conv_transpose
from frame.engine.ops.cost import Cost, CostQuery
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.pattern import GraphIndex, Rewrite, other_operand

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", "output_padding", "output_shape")



def _scratch(query: CostQuery) -> int:
    """The conv's temporaries (the affine chain runs in place in its output); a ConvTranspose scatters
    per tap into the output: nothing beyond it."""
    if query.attrs.get("transpose"):
        return 0
    return conv_scratch(query, query.attrs.get("conv_attrs", query.attrs))


COST = Cost(scratch=_scratch)

def _per_channel(shape: tuple[int, ...], rank: int, channels: int) -> bool:
    """Does a constant of ``shape`` broadcast over an output of ``rank`` per channel (axis 1) only?"""
    if len(shape) > rank:
        return False
    full = (1,) * (rank - len(shape)) + tuple(shape)
    return all(d == 1 for i, d in enumerate(full) if i != 1) and full[1] in (1, channels)


def _link(node: Node, value: str, weights: dict[str, WeightRef], rank: int, channels: int):
    """The chain entry for ``node`` applied to ``value``, with its parameter names, or None."""
    if node.domain:
        return None
    if node.op_type == "BatchNormalization":
        used = [o for o in node.outputs[1:] if o]
        params = node.inputs[1:5]
        if (node.inputs[0] != value or used or node.attrs.get("training_mode", 0) or len(params) != 4
                or not all(p in weights and weights[p].shape in ((channels,),) for p in params)):
            return None
        return ("bn", float(node.attrs.get("epsilon", 1e-5))), params
    other = other_operand(node, value) if node.op_type in ("Mul", "Add") else None
    if other is None or other not in weights or not _per_channel(weights[other].shape, rank, channels):
        return None
    return (node.op_type.lower(),), [other]


def fuse_conv_affine(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
                     ) -> tuple[list[Node], int]:
    """``nodes`` with every Conv/ConvTranspose → affine chain fused, and how many were."""
    index, rewrite = GraphIndex(nodes, graph_outputs, weights), Rewrite(nodes)
    for i, node in enumerate(nodes):
        if node.op_type not in ("Conv", "ConvTranspose") or node.domain or len(node.inputs) < 2:
            continue
        weight = weights.get(node.inputs[1])
        if weight is None or len(weight.shape) < 3:
            continue
        channels = weight.shape[0] if node.op_type == "Conv" else weight.shape[1] * node.attrs.get("group", 1)
        rank = len(weight.shape)
        chain, params, value, links = [], [], node.outputs[0], []
        j = index.sole_reader(value)
        while j is not None and j not in rewrite.removed:
            link = _link(nodes[j], value, weights, rank, channels)
            if link is None:
                break
            chain.append(link[0])
            params.extend(link[1])
            links.append(j)
            value = nodes[j].outputs[0]
            j = index.sole_reader(value)
        if not links:
            continue
        inputs = [node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else "", *params]
        attrs = {"conv_attrs": {k: v for k, v in node.attrs.items() if k in _CONV_ATTRS}, "chain": tuple(chain),
                 "transpose": node.op_type == "ConvTranspose"}
        spec = OpSpec("ConvAffine", 1, conv_affine, DOMAIN, cost=COST)
        fused = Node(f"{node.name}/affine", "ConvAffine", DOMAIN, inputs, [value], attrs, spec)
        rewrite.fuse(links[-1], fused, [i, *links[:-1]])
    if rewrite.count:
        log.debug("folded %d conv → affine chain(s)", rewrite.count)
    return rewrite.result(), rewrite.count


def _scale_shift(chain, params, channels: int) -> tuple[np.ndarray, np.ndarray]:
    scale = np.ones(channels, np.float64)
    shift = np.zeros(channels, np.float64)
    values = iter(params)
    for link in chain:
        if link[0] == "bn":
            gamma, beta, mean, var = (np.asarray(next(values), np.float64) for _ in range(4))
            factor = gamma / np.sqrt(var + link[1])
            scale, shift = scale * factor, (shift - mean) * factor + beta
        else:
            c = np.broadcast_to(np.asarray(next(values), np.float64).reshape(-1), (channels,))
            if link[0] == "mul":
                scale, shift = scale * c, shift * c
            else:
                shift = shift + c
    return scale.astype(np.float32), shift.astype(np.float32)


def conv_affine(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, *params: np.ndarray, conv_attrs: dict,
                chain: tuple, transpose: bool) -> np.ndarray:
    """Conv (or ConvTranspose) then the per-channel affine chain, folded into the weight or output."""
    channels = w.shape[1] * conv_attrs.get("group", 1) if transpose else w.shape[0]
    scale, shift = _scale_shift(chain, params, channels)
    bias = shift if b is None else b.astype(np.float32) * scale + shift
    spatial = int(np.prod(x.shape[2:])) * x.shape[0]
    if transpose or w.size > channels * spatial:  # scaling the output is the cheaper pass
        out = (conv_transpose if transpose else conv)(x, w, **conv_attrs)
        view = (1, -1) + (1,) * (out.ndim - 2)
        out *= scale.reshape(view).astype(out.dtype)
        out += bias.reshape(view).astype(out.dtype)
        return out
    folded = w.astype(np.float32) * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    return conv(x, folded, bias, **conv_attrs)
