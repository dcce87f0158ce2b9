"""Which initializer becomes what: float16, 8-bit per output channel, or unchanged.

Decided from the graph alone (no weight is read): an initializer's *consumers* say what it is.

* ``fp16``: every float32 initializer with at least ``min_elements`` values (tensors too large for
  float16 are found while converting and stay float32).
* ``uint8``: a weight whose every use is the weight operand of MatMul (2-D), Gemm, Conv or
  ConvTranspose is quantized per output channel (the axis follows from the op: MatMul's columns,
  Gemm's ``transB``, Conv's first and ConvTranspose's second dimension). The measured choices
  (``benchmarks/quant_schemes.py``, docs/benchmarks.md "8-bit weights") keep some weights in
  higher precision:

  - 1-D tensors (biases, norm scales) and other small operands stay float32: 0.03 % of the SD 1.5
    UNet's bytes;
  - lookup tables read by Gather (token and position embeddings) become float16: the engine reads
    only the 77 rows a prompt uses, so 8 bits would save disk space but not a byte of the night's
    reads;
  - convs with at most ``IO_CHANNELS`` input or output channels (the UNet's ``conv_in``/``conv_out``,
    the VAE decoder's ``post_quant_conv``, ``conv_in`` and ``conv_out``: the model's first and last
    layers, between the 4 latent or 3 colour channels and the network) stay float32: a few kilobytes,
    and the error of the last one lands unfiltered in the noise prediction or the picture.

A weight read through ``Cast(to=FLOAT)`` (the layout fp16 exports use) is judged by the Cast's
consumers. Uses inside subgraphs (If/Loop bodies) count as "other" uses: such weights stay as they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import onnx

from frame.engine.io.weights import WeightRef

FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16))
TO_FLOAT = onnx.TensorProto.FLOAT
IO_CHANNELS = 4  # latent channels (SD 1.5 and SDXL); RGB has 3


@dataclass(frozen=True)
class Action:
    """``kind`` is "keep", "fp16" or "quantize" (per channel along ``axis``)."""

    kind: str
    axis: int = 0
    reason: str = ""


KEEP = Action("keep")


@dataclass(frozen=True)
class Use:
    """One use of a value: the node's position, op type and input slot."""

    node: onnx.NodeProto
    slot: int


def _subgraph_inputs(node: onnx.NodeProto) -> Iterator[str]:
    for attr in node.attribute:
        graphs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
        for graph in graphs:
            for inner in graph.node:
                yield from inner.input
                yield from _subgraph_inputs(inner)


def uses_by_value(graph: onnx.GraphProto) -> dict[str, list[Use]]:
    """Every use of every value name; a use inside a subgraph has slot -1."""
    uses: dict[str, list[Use]] = {}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name:
                uses.setdefault(name, []).append(Use(node, slot))
        for name in set(_subgraph_inputs(node)):
            uses.setdefault(name, []).append(Use(node, -1))
    return uses


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for attr in node.attribute:
        if attr.name == name:
            return int(attr.i)
    return default


def weight_axis(use: Use, rank: int) -> int | None:
    """The output-channel axis of a weight operand, or None if this use is not a weight operand."""
    op, slot = use.node.op_type, use.slot
    if use.node.domain not in ("", "ai.onnx") or slot != 1:
        return None
    if op == "MatMul" and rank == 2:
        return 1
    if op == "Gemm" and rank == 2:
        return 0 if _attr(use.node, "transB", 0) else 1
    if op == "Conv" and rank >= 3:
        return 0
    if op == "ConvTranspose" and rank >= 3:
        return 1
    return None


def effective_uses(name: str, uses: dict[str, list[Use]]) -> list[Use]:
    """Uses of ``name``, looking through Cast(to=FLOAT) nodes that read it (fp16 export layout)."""
    found: list[Use] = []
    for use in uses.get(name, []):
        node = use.node
        if (node.op_type == "Cast" and use.slot == 0 and _attr(node, "to", 0) == TO_FLOAT
                and node.domain in ("", "ai.onnx")):
            found.extend(uses.get(node.output[0], []) or [use])
        else:
            found.append(use)
    return found


@dataclass(frozen=True)
class Policy:
    """The knobs of the uint8 plan (defaults: the measured choice)."""

    keep_io_convs: bool = True
    gather_fp16: bool = True
    min_elements: int = 2
    keep: re.Pattern | None = None


def _io_conv(shape: tuple[int, ...], uses: list[Use]) -> bool:
    """A conv between the latent/colour channels and the network (see ``IO_CHANNELS``)."""
    for use in uses:
        if use.node.op_type in ("Conv", "ConvTranspose"):
            group = _attr(use.node, "group", 1)
            first, second = shape[0], shape[1] * (group if use.node.op_type == "Conv" else 1)
            if use.node.op_type == "ConvTranspose":
                first, second = shape[1] * group, shape[0]
            if min(first, second) <= IO_CHANNELS:
                return True
    return False


def plan(graph: onnx.GraphProto, weights: dict[str, WeightRef], mode: str, policy: Policy = Policy()
         ) -> dict[str, Action]:
    """An Action for every initializer of ``graph`` (``mode`` is "fp16" or "uint8")."""
    uses = uses_by_value(graph)
    graph_io = {v.name for v in graph.input} | {v.name for v in graph.output}
    actions: dict[str, Action] = {}
    for name, ref in weights.items():
        size = math.prod(ref.shape)
        if ref.dtype not in FLOAT_TYPES or size < policy.min_elements or (policy.keep and policy.keep.search(name)):
            actions[name] = KEEP
            continue
        if mode == "fp16":
            actions[name] = Action("fp16") if ref.dtype == np.float32 else KEEP
            continue
        actions[name] = _uint8_action(name, ref, effective_uses(name, uses), graph_io, policy)
    return actions


def _uint8_action(name: str, ref: WeightRef, uses: list[Use], graph_io: set[str], policy: Policy) -> Action:
    rank = len(ref.shape)
    if not uses or rank < 2 or name in graph_io:
        return KEEP
    if all(u.node.op_type == "Gather" and u.slot == 0 and _attr(u.node, "axis", 0) == 0 for u in uses):
        if policy.gather_fp16 and ref.dtype == np.float32:
            return Action("fp16", reason="lookup table")
        return KEEP
    axes = {weight_axis(u, rank) for u in uses}
    if len(axes) != 1 or None in axes:
        return KEEP
    if policy.keep_io_convs and _io_conv(ref.shape, uses):
        return Action("keep", reason="first/last conv")
    return Action("quantize", axis=axes.pop())
