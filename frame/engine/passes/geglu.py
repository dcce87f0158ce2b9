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
node's stored tensor): ``MatMul(x, W1) → Add(b1) → two Slices`` (plus ``Shape`` nodes reading the
projection, which are given its shape without it) ``→`` an element-wise gate subgraph on one Slice
(Div/Erf/Add/Mul for the exact GELU, Tanh for the approximation, a Gelu node...: element-wise ops
whose other operands are scalar constants) ``→ Mul(other Slice, gate) → MatMul(·, W2)``. Which
columns each Slice takes is checked on every run (they must be two equal-length column ranges);
anything else runs the original kernels on the whole tensors, so the rewrite never changes results.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from frame.engine import buffers
from frame.engine.graph import Node, consumer_index, producer_index, rewrite_nodes
from frame.engine.io.weights import WeightRef
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.weight_decoding import Layout, decode_block

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
BLOCK_BYTES = 8 << 20  # float32 tokens x |J| per temporary
MIN_BLOCK_CHANNELS = 256  # narrower GEMMs lose speed to BLAS thread synchronisation
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid", "Pow", "Sqrt", "Neg", "Relu",
                         "Gelu", "SiLU", "Exp", "Identity"})


@dataclass(frozen=True)
class WeightSource:
    """A fused MatMul's weight: a float32/fp16 initializer, or 8-bit data with its scale and zero point."""

    stored: str
    scale: str = ""
    zero_point: str = ""
    quant_axis: int = 1


@dataclass
class GegluPlan:
    """What the kernel needs besides its inputs: how to run the gate subgraph and the fallback."""

    gate_input: str  # the gate Slice's output name inside the gate subgraph
    gate_nodes: list[Node] = field(default_factory=list)
    gate_output: str = ""
    hidden_first: bool = True  # product = Mul(hidden, gate) (False: Mul(gate, hidden))
    slices: tuple = ()  # (hidden Slice kernel, gate Slice kernel), attributes bound
    constants: list[str] = field(default_factory=list)  # gate subgraph operands, in fused-input order
    dying: list[tuple[str, ...]] = field(default_factory=list)  # per gate node: values last used there

    def __post_init__(self) -> None:
        last: dict[str, int] = {}
        for k, node in enumerate(self.gate_nodes):
            for name in node.inputs:
                if name and name not in self.constants:
                    last[name] = k
        self.dying = [tuple(n for n, k in last.items() if k == position and n != self.gate_output)
                      for position in range(len(self.gate_nodes))]


# ------------------------------------------------------------------------------------------ kernel
def _weight(arrays: tuple, axis: int, start: int, stop: int, quant_axis: int) -> np.ndarray:
    q, scale, zero_point = arrays
    if scale is None and q.dtype == np.float32 and isinstance(q, np.ndarray):  # not a LoraStored
        index = [slice(None)] * q.ndim
        index[axis] = slice(start, stop)
        return q[tuple(index)]
    return decode_block(q, scale, zero_point, quant_axis, axis, start, stop)


def _column_range(slice_fn, slice_args: list, shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(first, length) of the columns a Slice node takes from a tensor of ``shape``, if it takes whole
    rows of a contiguous column range (probed on a zero-copy index view, never on the data)."""
    probe = np.broadcast_to(np.arange(shape[-1], dtype=np.int64), shape)
    taken = slice_fn(probe, *slice_args)
    if taken.shape[:-1] != shape[:-1] or taken.shape[-1] == 0:
        return None
    columns = taken[(0,) * (taken.ndim - 1)]
    first = int(columns[0])
    if not np.array_equal(columns, np.arange(first, first + columns.size)):
        return None
    return first, int(columns.size)


def _gate(plan: GegluPlan, gate: np.ndarray, constants: dict[str, np.ndarray]) -> np.ndarray:
    """Run the gate subgraph on one block: values freed at their last use, and kernels that can write
    into a dying input 0 do (the block's temporaries stay at one or two)."""
    env = {plan.gate_input: gate, **constants}
    del gate
    for node, dying in zip(plan.gate_nodes, plan.dying):
        args = [env[name] if name else None for name in node.inputs]
        attrs = node.attrs
        if node.spec.inplace and node.inputs[0] in dying and node.inputs.count(node.inputs[0]) == 1:
            attrs = {**attrs, "_reuse": True}
        for name in dying:
            del env[name]
        env[node.outputs[0]] = node.spec.fn(*args, **attrs)
        del args
    return env[plan.gate_output]


def geglu_ff(x: np.ndarray, w1: np.ndarray, s1: np.ndarray | None, z1: np.ndarray | None, b1: np.ndarray,
             w2: np.ndarray, s2: np.ndarray | None, z2: np.ndarray | None, *rest: np.ndarray | None,
             _plan: GegluPlan, _axes: tuple[int, int], _slice_counts: tuple[int, int]) -> np.ndarray:
    """The fused node's kernel: ``MatMul(hidden * gate(gate_half), W2)`` (the result before W2's bias)."""
    hidden_args = list(rest[:_slice_counts[0]])
    gate_args = list(rest[_slice_counts[0]:_slice_counts[0] + _slice_counts[1]])
    constants = dict(zip(_plan.constants, rest[_slice_counts[0] + _slice_counts[1]:]))
    first, second = (w1, s1, z1), (w2, s2, z2)
    width = w1.shape[1]
    shape = x.shape[:-1] + (width,)
    hidden = _column_range(_plan.slices[0], hidden_args, shape)
    gate = _column_range(_plan.slices[1], gate_args, shape)
    if (x.dtype != np.float32 or hidden is None or gate is None or hidden[1] != gate[1]
            or hidden[1] != w2.shape[0] or b1.shape not in ((width,), (1, width)) or x.ndim < 2):
        return _unfused(x, first, second, b1, hidden_args, gate_args, constants, _plan, _axes)
    b1 = b1.reshape(-1).astype(np.float32, copy=False)
    channels = hidden[1]
    tokens = int(np.prod(x.shape[:-1]))
    step = max(MIN_BLOCK_CHANNELS, BLOCK_BYTES // max(1, 4 * tokens))
    out = None
    for j0 in range(0, channels, step):
        j1 = min(channels, j0 + step)
        block_shape = x.shape[:-1] + (j1 - j0,)
        h = np.matmul(x, _weight(first, 1, hidden[0] + j0, hidden[0] + j1, _axes[0]), out=buffers.empty(block_shape))
        h += b1[hidden[0] + j0:hidden[0] + j1]
        g = np.matmul(x, _weight(first, 1, gate[0] + j0, gate[0] + j1, _axes[0]), out=buffers.empty(block_shape))
        g += b1[gate[0] + j0:gate[0] + j1]
        g = _gate(_plan, g, constants)
        product = np.multiply(h, g, out=h)  # exact either way round: h·g == g·h in IEEE arithmetic
        del h, g
        w2 = _weight(second, 0, j0, j1, _axes[1])
        if out is None:
            out = np.matmul(product, w2, out=buffers.empty(x.shape[:-1] + (w2.shape[1],)))
        else:
            part = np.matmul(product, w2, out=buffers.empty(out.shape))
            out += part
            del part
        del product
    return out


def _unfused(x, first, second, b1, hidden_args, gate_args, constants, plan: GegluPlan, axes) -> np.ndarray:
    """The original chain on whole tensors (operands the blocked form cannot prove equal for)."""
    log.debug("GegluFF: operands do not split into two column halves; running the original chain")
    w1 = _weight(first, 1, 0, first[0].shape[1], axes[0])
    projected = np.matmul(x, w1) + b1
    hidden = plan.slices[0](projected, *hidden_args)
    gate = _gate(plan, plan.slices[1](projected, *gate_args), constants)
    product = hidden * gate if plan.hidden_first else gate * hidden
    return np.matmul(product, _weight(second, 0, 0, second[0].shape[0], axes[1]))


def shape_without(x: np.ndarray, *, _width: int, _shape_fn) -> np.ndarray:
    """``Shape`` of ``MatMul(x, W)`` (W ``_width`` columns wide) computed without that product."""
    return _shape_fn(np.broadcast_to(np.zeros((), np.float32), x.shape[:-1] + (_width,)))


# ------------------------------------------------------------------------------------------ the pass
def _matmul_weight(node: Node, weights: dict[str, WeightRef]) -> WeightSource | None:
    """The weight of a plain MatMul on a 2-D float32 initializer or of a DecodedWeight MatMul."""
    ref = weights.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if ref is None or len(ref.shape) != 2:
        return None
    if node.domain == "" and node.op_type == "MatMul" and len(node.inputs) == 2 and ref.dtype == np.float32:
        return WeightSource(node.inputs[1])
    if node.domain == DOMAIN and node.op_type == "DecodedWeight" and node.spec is not None and len(node.inputs) == 4:
        keywords = node.spec.fn.keywords
        if keywords.get("_layout") == Layout(1, -1, None):
            return WeightSource(node.inputs[1], node.inputs[2], node.inputs[3], keywords.get("_quant_axis", 1))
    return None


@dataclass
class _Match:
    project: int
    bias_add: int
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


class _Graph:
    """Indexes the rewrite walks on."""

    def __init__(self, nodes: list[Node], weights: dict[str, WeightRef], outputs: set[str]) -> None:
        self.nodes, self.weights, self.outputs = nodes, weights, outputs
        self.producer = producer_index(nodes)
        self.consumers = consumer_index(nodes)

    def only_reader(self, name: str) -> int | None:
        readers = self.consumers.get(name, [])
        return readers[0] if len(readers) == 1 and name not in self.outputs else None

    def produced_by(self, name: str, op: str) -> int | None:
        i = self.producer.get(name)
        return i if i is not None and self.nodes[i].op_type == op and not self.nodes[i].domain else None

    def scalar(self, name: str) -> bool:
        ref = self.weights.get(name)
        if ref is not None:
            return math.prod(ref.shape) == 1
        i = self.produced_by(name, "Constant")
        value = self.nodes[i].attrs.get("value") if i is not None else None
        return isinstance(value, np.ndarray) and value.size == 1


def _gate_subgraph(graph: _Graph, start: str, end: str) -> tuple[list[int], list[str]] | None:
    """The element-wise nodes computing ``end`` from ``start`` and scalar constants, every value of which
    only they read (``end`` aside); with the constants' names. None if anything else is involved."""
    members: set[int] = set()
    pending = [end]
    while pending:
        name = pending.pop()
        if name == start or graph.scalar(name):
            continue
        i = graph.producer.get(name)
        if i is None:
            return None
        if i in members:
            continue
        node = graph.nodes[i]
        if node.op_type not in ELEMENTWISE or (node.domain and node.op_type != "SiLU") or len(node.outputs) != 1:
            return None
        members.add(i)
        pending += [n for n in node.inputs if n]
    produced = {graph.nodes[i].outputs[0] for i in members}
    for name in produced | {start}:
        if name != end and (name in graph.outputs or any(u not in members for u in graph.consumers.get(name, []))):
            return None
    if not members:
        return None
    constants = sorted({n for i in members for n in graph.nodes[i].inputs if n and graph.scalar(n)})
    return sorted(members), constants


def _projection(graph: _Graph, projected: str, slices: set[int]):
    """``projected`` = Add(MatMul(x, W1), b1), read only by the two Slices and by Shape nodes."""
    bias_add = graph.produced_by(projected, "Add")
    if bias_add is None or projected in graph.outputs:
        return None
    shapes = [k for k in graph.consumers.get(projected, []) if k not in slices]
    if any(graph.nodes[k].op_type != "Shape" or graph.nodes[k].domain for k in shapes):
        return None
    inputs = graph.nodes[bias_add].inputs
    for mm_out in inputs:
        project = graph.producer.get(mm_out)
        if project is None or graph.only_reader(mm_out) != bias_add:
            continue
        first = _matmul_weight(graph.nodes[project], graph.weights)
        bias = [n for n in inputs if n != mm_out]
        stored, cast = _bias_source(graph, bias[0], bias_add) if len(bias) == 1 else (None, None)
        if first is not None and stored is not None:
            return project, bias_add, shapes, first, stored, cast
    return None


def _bias_source(graph: _Graph, name: str, bias_add: int) -> tuple[str | None, int | None]:
    """The bias initializer behind ``name``, and the ``Cast(to=FLOAT)`` between them if any: fp16
    exports (``frame model convert --weights fp16``, optimum's ``--fp16``) widen every bias through one,
    which hid all 70 GEGLU blocks of the fp16 SDXL UNet from this rewrite (the kernel widens the bias)."""
    if name in graph.weights:
        return name, None
    cast = graph.produced_by(name, "Cast")
    if (cast is None or graph.nodes[cast].attrs.get("to") != 1 or graph.only_reader(name) != bias_add
            or graph.nodes[cast].inputs[0] not in graph.weights):
        return None, None
    return graph.nodes[cast].inputs[0], cast


def _match(graph: _Graph, i: int) -> _Match | None:
    nodes = graph.nodes
    second = _matmul_weight(nodes[i], graph.weights)
    product = graph.produced_by(nodes[i].inputs[0], "Mul") if second is not None else None
    if product is None or graph.only_reader(nodes[i].inputs[0]) != i:
        return None
    for hidden_pos in (0, 1):
        hidden_name, gate_out = nodes[product].inputs[hidden_pos], nodes[product].inputs[1 - hidden_pos]
        hs = graph.produced_by(hidden_name, "Slice")
        if hs is None or graph.only_reader(hidden_name) != product or graph.only_reader(gate_out) != product:
            continue
        projected = nodes[hs].inputs[0]
        for gs in graph.consumers.get(projected, []):
            if gs == hs or nodes[gs].op_type != "Slice" or nodes[gs].domain or nodes[gs].inputs[0] != projected:
                continue
            sub = _gate_subgraph(graph, nodes[gs].outputs[0], gate_out)
            found = _projection(graph, projected, {hs, gs}) if sub is not None else None
            if found is None:
                continue
            project, bias_add, shapes, first, bias, bias_cast = found
            plan = GegluPlan(nodes[gs].outputs[0], [nodes[k] for k in sub[0]], gate_out, hidden_pos == 0,
                             (_bound(nodes[hs]), _bound(nodes[gs])), sub[1])
            return _Match(project, bias_add, (hs, gs), shapes, sub[0], product, i, first, second, bias, plan,
                          bias_cast)
    return None


def _bound(node: Node):
    return partial(node.spec.fn, **node.attrs)


def _fused(match: _Match, nodes: list[Node], weights: dict[str, WeightRef]) -> Node:
    hs, gs = (nodes[k] for k in match.slices)
    hidden_args, gate_args = hs.inputs[1:], gs.inputs[1:]
    w1, w2 = match.w1, match.w2
    fn = partial(geglu_ff, _plan=match.plan, _axes=(w1.quant_axis, w2.quant_axis),
                 _slice_counts=(len(hidden_args), len(gate_args)))
    inputs = [nodes[match.project].inputs[0], w1.stored, w1.scale, w1.zero_point, match.bias,
              w2.stored, w2.scale, w2.zero_point, *hidden_args, *gate_args, *match.plan.constants]
    out = nodes[match.output]
    return Node(f"{out.name}/geglu", "GegluFF", DOMAIN, inputs, list(out.outputs), {},
                OpSpec("GegluFF", 1, fn, DOMAIN))


def _shape_node(node: Node, x: str, width: int) -> Node:
    fn = partial(shape_without, _width=width, _shape_fn=_bound(node))
    return Node(f"{node.name}/without_product", "ShapeOfProduct", DOMAIN, [x], list(node.outputs), {},
                OpSpec("ShapeOfProduct", 1, fn, DOMAIN))


def fuse_geglu(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
               ) -> tuple[list[Node], int]:
    """``nodes`` with every GEGLU feed-forward as one GegluFF node (plus the Shape nodes it feeds
    rewritten to not need the projection), and the count."""
    graph = _Graph(nodes, weights, graph_outputs)
    replaced: dict[int, Node] = {}
    removed: set[int] = set()
    for i in range(len(nodes)):
        match = _match(graph, i)
        if match is None or i in removed:
            continue
        replaced[i] = _fused(match, nodes, weights)
        x, width = nodes[match.project].inputs[0], weights[match.w1.stored].shape[1]
        for k in match.shapes:
            replaced[k] = _shape_node(nodes[k], x, width)
        removed |= {match.project, match.bias_add, *match.slices, *match.gate, match.product}
        if match.bias_cast is not None:
            removed.add(match.bias_cast)
    if replaced:
        log.debug("fused %d GEGLU feed-forward(s)", len([n for n in replaced.values() if n.op_type == "GegluFF"]))
    count = len([n for n in replaced.values() if n.op_type == "GegluFF"])
    return rewrite_nodes(nodes, replaced, removed), count
