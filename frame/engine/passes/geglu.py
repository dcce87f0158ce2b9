"""Load-time rewrite: the transformer's GEGLU feed-forward runs in blocks of its hidden channels.

Every transformer block of the SD 1.5 and SDXL UNets ends in ``x → proj (MatMul + bias, 2·I wide) →
chunk into hidden | gate → hidden * gelu(gate) → MatMul (I → C)``. Run node by node, the projection
is the largest activation of the whole UNet: tokens × 2I floats, 168 MB for SDXL's 64×64 level
(4096 tokens × 10240) at 1024², next to its two halves, the GELU and the product (215 MB live at
once, the top of the SDXL UNet's peak). Hidden channel ``j`` of the product depends only on columns
``j`` of both halves, so the whole chain can run on a block ``J`` of hidden channels at a time:

    out = Σ_J (x · W1[:, hidden J] + b1) * gelu(x · W1[:, gate J] + b1) · W2[J, :]

Temporaries are then tokens × |J| (``BLOCK_BYTES``), every weight is still read once and, for 8-bit or
fp16 weights, decoded block by block (``weight_decoding.decode_block``) instead of whole: the float32
projection weight alone would be 52 MB for SDXL. The FLOPs are the same; only the final sum is
accumulated over blocks (float32 rounding, ~1e-7 relative).

What is matched, after ``weight_decoding`` (so a weight is a float32 initializer or a DecodedWeight
node's stored tensor): ``MatMul(x, W1) → Add(b1)`` or ``Gemm(x, W1, b1, transB=1)`` (a Linear as
``frame.convert.graphs`` writes it, W1 stored (2I, C) as torch has it) ``→ two Slices`` (plus ``Shape``
nodes reading the projection, which are given its shape without it) ``→`` an element-wise gate
subgraph on one Slice (Div/Erf/Add/Mul for the exact GELU, Tanh for the approximation, a Gelu
node...: element-wise ops whose other operands are scalar constants) ``→ Mul(other Slice, gate) →
MatMul(·, W2)`` (or ``Gemm(·, W2, b2, transB=1)``, whose bias the fused node adds). Which columns
each Slice takes is checked on every run (they must be two equal-length column ranges); anything
else runs the original kernels on the whole tensors, so the rewrite never changes results.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.ops.cost import OUTPUT_ONLY, VIEW, Cost, CostQuery
from frame.engine.ops.linalg import gemm
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.geglu_kernel import GegluPlan, geglu_ff, shape_without
from frame.engine.passes.pattern import GraphIndex, Rewrite
from frame.engine.passes.weight_decoding import Layout

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid", "Pow", "Sqrt", "Neg", "Relu",
                         "Gelu", "SiLU", "Exp", "Identity"})


@dataclass(frozen=True)
class WeightSource:
    """A fused MatMul's weight: a float32/fp16 initializer, or 8-bit data with its scale and zero point."""

    stored: str
    scale: str = ""
    zero_point: str = ""
    quant_axis: int = 1
    transposed: bool = False  # stored (out, in), read by a Gemm with transB=1


# ------------------------------------------------------------------------------------------ the pass
def _plain_gemm(attrs: dict) -> bool:
    """``A · Bᵀ + C``: a Linear with its (out, in) weight as stored."""
    return (attrs.get("transB", 0) == 1 and attrs.get("transA", 0) == 0 and attrs.get("alpha", 1.0) == 1.0
            and attrs.get("beta", 1.0) == 1.0)


def _matmul_weight(node: Node, weights: dict[str, WeightRef]) -> tuple[WeightSource, str] | None:
    """The weight of a plain MatMul or Gemm (transB) on a 2-D float32 initializer or of a DecodedWeight
    MatMul or Gemm, and the Gemm's bias input ("" for a MatMul or a Gemm without one)."""
    ref = weights.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if ref is None or len(ref.shape) != 2:
        return None
    if node.domain == "" and node.op_type == "MatMul" and len(node.inputs) == 2 and ref.dtype == np.float32:
        return WeightSource(node.inputs[1]), ""
    if (node.domain == "" and node.op_type == "Gemm" and len(node.inputs) in (2, 3) and ref.dtype == np.float32
            and _plain_gemm(node.attrs)):
        return WeightSource(node.inputs[1], transposed=True), (node.inputs[2] if len(node.inputs) == 3 else "")
    if node.domain == DOMAIN and node.op_type == "DecodedWeight" and node.spec is not None:
        keywords = node.spec.keywords
        stored = WeightSource(node.inputs[1], node.inputs[2], node.inputs[3], keywords.get("_quant_axis", 1))
        if keywords.get("_layout") == Layout(1, -1, None) and len(node.inputs) == 4:
            return stored, ""
        kernel = keywords.get("_kernel")
        if (keywords.get("_layout") == Layout(0, 1, 2) and len(node.inputs) in (4, 5) and isinstance(kernel, partial)
                and getattr(kernel.func, "__wrapped__", kernel.func) is gemm and _plain_gemm(kernel.keywords)):
            transposed = WeightSource(stored.stored, stored.scale, stored.zero_point, stored.quant_axis, True)
            return transposed, (node.inputs[4] if len(node.inputs) == 5 else "")
    return None


@dataclass
class _Match:
    project: int
    bias_add: int | None  # None: the projection is a Gemm holding b1
    slices: tuple[int, int]  # hidden, gate
    shapes: list[int]
    gate: list[int]
    product: int
    output: int
    w1: WeightSource
    w2: WeightSource
    bias: str
    plan: GegluPlan
    bias_cast: int | None = None  # Cast(to=FLOAT) of an fp16 bias, removed with the chain
    bias2: str = ""  # the second linear's bias when it is a Gemm holding one
    bias2_cast: int | None = None


def _gate_subgraph(index: GraphIndex, start: str, end: str) -> tuple[list[int], list[str]] | None:
    """The element-wise nodes computing ``end`` from ``start`` and scalar constants, every value of which
    only they read (``end`` aside); with the constants' names. None if anything else is involved."""
    members: set[int] = set()
    pending = [end]
    while pending:
        name = pending.pop()
        if name == start or index.is_scalar(name):
            continue
        i = index.producer.get(name)
        if i is None:
            return None
        if i in members:
            continue
        node = index.nodes[i]
        if node.op_type not in ELEMENTWISE or (node.domain and node.op_type != "SiLU") or len(node.outputs) != 1:
            return None
        members.add(i)
        pending += [n for n in node.inputs if n]
    produced = {index.nodes[i].outputs[0] for i in members}
    for name in produced | {start}:
        if name != end and (name in index.outputs or any(u not in members for u in index.consumers.get(name, []))):
            return None
    if not members:
        return None
    constants = sorted({n for i in members for n in index.nodes[i].inputs if n and index.is_scalar(n)})
    return sorted(members), constants


def _projection(index: GraphIndex, projected: str, slices: set[int]):
    """``projected`` = Add(MatMul(x, W1), b1) or Gemm(x, W1, b1), read only by the two Slices and by
    Shape nodes."""
    if projected in index.outputs:
        return None
    shapes = [k for k in index.consumers.get(projected, []) if k not in slices]
    if any(index.nodes[k].op_type != "Shape" or index.nodes[k].domain for k in shapes):
        return None
    project = index.producer.get(projected)
    gemm_found = _matmul_weight(index.nodes[project], index.weights) if project is not None else None
    if gemm_found is not None and gemm_found[1]:  # the Gemm holds b1
        stored, cast = _bias_source(index, gemm_found[1], project)
        return (project, None, shapes, gemm_found[0], stored, cast) if stored is not None else None
    bias_add = index.producer_of(projected, "Add")
    if bias_add is None:
        return None
    inputs = index.nodes[bias_add].inputs
    for mm_out in inputs:
        project = index.producer.get(mm_out)
        if project is None or index.sole_reader(mm_out) != bias_add:
            continue
        first = _matmul_weight(index.nodes[project], index.weights)
        bias = [n for n in inputs if n != mm_out]
        stored, cast = _bias_source(index, bias[0], bias_add) if len(bias) == 1 else (None, None)
        if first is not None and not first[1] and stored is not None:
            return project, bias_add, shapes, first[0], stored, cast
    return None


def _bias_source(index: GraphIndex, name: str, reader: int) -> tuple[str | None, int | None]:
    """The bias initializer behind ``name``, and the ``Cast(to=FLOAT)`` between them if any: fp16
    exports (``frame model convert --weights fp16``, optimum's ``--fp16``) widen every bias through one,
    which hid all 70 GEGLU blocks of the fp16 SDXL UNet from this rewrite (the kernel widens the bias)."""
    if name in index.weights:
        return name, None
    cast = index.producer_of(name, "Cast")
    if (cast is None or index.nodes[cast].attrs.get("to") != 1 or index.sole_reader(name) != reader
            or index.nodes[cast].inputs[0] not in index.weights):
        return None, None
    return index.nodes[cast].inputs[0], cast


def _match(index: GraphIndex, i: int) -> _Match | None:
    nodes = index.nodes
    found_second = _matmul_weight(nodes[i], index.weights)
    product = index.producer_of(nodes[i].inputs[0], "Mul") if found_second is not None else None
    if product is None or index.sole_reader(nodes[i].inputs[0]) != i:
        return None
    second, bias2_name = found_second
    bias2, bias2_cast = _bias_source(index, bias2_name, i) if bias2_name else ("", None)
    if bias2 is None:
        return None
    for hidden_pos in (0, 1):
        hidden_name, gate_out = nodes[product].inputs[hidden_pos], nodes[product].inputs[1 - hidden_pos]
        hs = index.producer_of(hidden_name, "Slice")
        if hs is None or index.sole_reader(hidden_name) != product or index.sole_reader(gate_out) != product:
            continue
        projected = nodes[hs].inputs[0]
        for gs in index.consumers.get(projected, []):
            if gs == hs or nodes[gs].op_type != "Slice" or nodes[gs].domain or nodes[gs].inputs[0] != projected:
                continue
            sub = _gate_subgraph(index, nodes[gs].outputs[0], gate_out)
            found = _projection(index, projected, {hs, gs}) if sub is not None else None
            if found is None:
                continue
            project, bias_add, shapes, first, bias, bias_cast = found
            plan = GegluPlan(nodes[gs].outputs[0], [nodes[k] for k in sub[0]], gate_out, hidden_pos == 0,
                             (_bound(nodes[hs]), _bound(nodes[gs])), sub[1])
            return _Match(project, bias_add, (hs, gs), shapes, sub[0], product, i, first, second, bias, plan,
                          bias_cast, bias2, bias2_cast)
    return None


def _bound(node: Node):
    return partial(node.spec.fn, **node.attrs)


def _decoded(query: CostQuery) -> int:
    """The two projections' weight values (inputs 1 and 5), widened to float32 on every call unless
    they are float32 already."""
    if len(query.inputs) <= 5:
        return 0
    refs = [query.weights.get(query.inputs[k]) for k in (1, 5)]
    return sum(math.prod(r.shape) for r in refs if r is not None and r.dtype != np.float32)


COST = Cost(passes=OUTPUT_ONLY.passes, decoded=_decoded)


def _fused(match: _Match, nodes: list[Node], weights: dict[str, WeightRef]) -> Node:
    hs, gs = (nodes[k] for k in match.slices)
    hidden_args, gate_args = hs.inputs[1:], gs.inputs[1:]
    w1, w2 = match.w1, match.w2
    fn = partial(geglu_ff, _plan=match.plan, _axes=(w1.quant_axis, w2.quant_axis),
                 _slice_counts=(len(hidden_args), len(gate_args)), _transposed=(w1.transposed, w2.transposed))
    inputs = [nodes[match.project].inputs[0], w1.stored, w1.scale, w1.zero_point, match.bias,
              w2.stored, w2.scale, w2.zero_point, match.bias2, *hidden_args, *gate_args, *match.plan.constants]
    out = nodes[match.output]
    return Node(f"{out.name}/geglu", "GegluFF", DOMAIN, inputs, list(out.outputs), {},
                OpSpec("GegluFF", 1, fn, DOMAIN, cost=COST))


def _shape_node(node: Node, x: str, width: int) -> Node:
    fn = partial(shape_without, _width=width, _shape_fn=_bound(node))
    return Node(f"{node.name}/without_product", "ShapeOfProduct", DOMAIN, [x], list(node.outputs), {},
                OpSpec("ShapeOfProduct", 1, fn, DOMAIN, cost=VIEW))


def fuse_geglu(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
               ) -> tuple[list[Node], int]:
    """``nodes`` with every GEGLU feed-forward as one GegluFF node (plus the Shape nodes it feeds
    rewritten to not need the projection), and the count."""
    index, rewrite = GraphIndex(nodes, graph_outputs, weights), Rewrite(nodes)
    for i in range(len(nodes)):
        match = _match(index, i)
        if match is None or i in rewrite.removed:
            continue
        x, width = nodes[match.project].inputs[0], weights[match.w1.stored].shape[0 if match.w1.transposed else 1]
        for k in match.shapes:
            rewrite.replace(k, _shape_node(nodes[k], x, width))
        optional = (match.bias_add, match.bias_cast, match.bias2_cast)
        rewrite.fuse(i, _fused(match, nodes, weights), [match.project, *match.slices, *match.gate, match.product,
                                                        *(k for k in optional if k is not None)])
    if rewrite.count:
        log.debug("fused %d GEGLU feed-forward(s)", rewrite.count)
    return rewrite.result(), rewrite.count
