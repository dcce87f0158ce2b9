"""One evaluation of one model as the engine plans it: work, weight bytes and memory per plan step.

``plan_costs(source, input_shapes)`` reads the structure (no weight bytes: the protobuf scanner
skips them; only small shape constants are read), infers every tensor's shape
(``frame.engine.counted_shapes``), costs every standard ONNX node as its kernel declares
(``frame.engine.costs.node_work``), then plans the model exactly as ``frame.engine.load_model``
does (same fusions, same fetch/free lists) with a provider that never reads, and attributes each
node's cost to the plan step that runs it, scaled by what a fused kernel declares it does of it
(``step_share``). Per step it records the weights fetched (what crosses the disk or the link), the
activations alive (``frame.engine.live_buffers``), the weights held, the kernel's declared scratch
memory and the weight values it decodes. Constant subgraphs the engine folds at load cost nothing
per run and are left out. ``frame.estimate`` turns these counts into the night's seconds and peak.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frame.engine import blas_threads as bt
from frame.engine import graph as g
from frame.engine.costs import KINDS, Work, node_work, step_decoded, step_scratch, step_share
from frame.engine.counted_shapes import ShapeTable, infer_shapes
from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.weights import WeightRef
from frame.engine.live_buffers import LiveBuffers
from frame.engine.model import plan_structure, read_structure
from frame.engine.ops.cost import known
from frame.engine.passes.sliced_attention import AttentionConfig
from frame.engine.passes.weight_decoding import channel_blocks
from frame.engine.static_shapes import fill_small_values, read_small_values
from frame.engine.subgraphs import fetch_order

Describe = Callable[[g.Step, ShapeTable, Mapping, bool], Any]

SMALL_INTEGER_BYTES = 4096  # shape targets, axes, indices
SMALL_FLOAT_BYTES = 64      # scalars that shape arithmetic uses (mask fill values, eps)


@dataclass(frozen=True)
class StepCost:
    """One engine step (one op, possibly fused from several ONNX nodes) of one evaluation."""

    op_type: str
    macs: tuple[int, int, int]  # conv, matmul, attention multiply-adds, as the ONNX ops define them
    engine_macs: tuple[int, int, int]  # what the engine's kernels do (fused upsample convs: 4/9)
    element_bytes: int          # activation bytes read and written by memory-bound work
    decoded_elements: int       # fp16/8-bit weight values decoded to float32 inside the op
    fetches: tuple[int, ...]    # bytes of each weight read from storage before the step
    live_bytes: int             # activations alive while it runs (inputs, outputs, kept values)
    weight_bytes: int           # weights held while it runs (as the engine holds them)
    scratch_bytes: int          # the kernel's own temporary buffers
    signature: Any = None       # what a throughput probe must run to time this step (``describe``)
    kept_bytes: int = 0         # activations still alive once it is done (its dead values freed)
    row_bytes: int = 0          # a weight the op reads itself, block by block (``WeightRows``)
    row_blocks: int = 0         # its blocks: the next is read while one computes (``weight_rows``)

    @property
    def resident_bytes(self) -> int:
        return self.live_bytes + self.weight_bytes + self.scratch_bytes


@dataclass
class PlanCosts:
    """The count of one evaluation of ``source`` at ``input_shapes``."""

    source: str
    input_shapes: dict[str, tuple[int, ...]]
    steps: list[StepCost]
    stored_weight_bytes: int     # every weight the file holds
    node_count: int              # ONNX nodes (before the engine's fusions)
    unknown_shapes: int = 0      # node outputs whose shape stayed unknown (their cost is missing)
    load_seconds: float = 0.0    # reading the structure and planning it, as loading the model does
    macs_by_op: dict[str, int] = field(default_factory=dict)
    input_bytes: int = 0         # the graph inputs (alive before the first step)
    precision: str = "fp32"      # the streamed weights' dtype, as the ``precision`` argument names it

    @property
    def macs(self) -> int:
        return sum(sum(s.macs) for s in self.steps)

    def macs_of(self, kind: str) -> int:
        return sum(s.macs[KINDS.index(kind)] for s in self.steps)

    @property
    def weight_bytes(self) -> int:
        """Bytes fetched from disk or link per evaluation (token tables: only the rows used; weights
        read block by block inside their op included)."""
        return sum(sum(s.fetches) + s.row_bytes for s in self.steps)

    @property
    def element_bytes(self) -> int:
        return sum(s.element_bytes for s in self.steps)

    @property
    def decoded_elements(self) -> int:
        return sum(s.decoded_elements for s in self.steps)

    def peak_step(self) -> int:
        return max(range(len(self.steps)), key=lambda i: self.steps[i].resident_bytes) if self.steps else 0

    @property
    def peak_bytes(self) -> int:
        """Largest activations + held weights + scratch of any step (without provider read-ahead)."""
        return self.steps[self.peak_step()].resident_bytes if self.steps else 0


def _step_of_nodes(nodes: list[g.Node], steps: list[g.Step], folded: set[str]) -> list[int | None]:
    """For each ONNX node, the plan step that runs it: the step producing one of its outputs, or
    (inside a fused pattern) the step its output flows into; None for nodes folded at load. ``Shape``
    readers do not count as flowing into (GEGLU's projection is read by Shape nodes, which run as
    ``ShapeOfProduct`` steps before the ``GegluFF`` step that computes it)."""
    produced = {o: i for i, s in enumerate(steps) for o in s.node.outputs if o}
    consumers = g.consumer_index(nodes)
    found: list[int | None] = [None] * len(nodes)
    for i in reversed(range(len(nodes))):
        outputs = [o for o in nodes[i].outputs if o]
        if not outputs or all(o in folded for o in outputs):
            continue
        direct = next((produced[o] for o in outputs if o in produced), None)
        if direct is None:
            later = [found[j] for o in outputs for j in consumers.get(o, [])
                     if found[j] is not None and nodes[j].op_type != "Shape"]
            direct = min(later) if later else None
        found[i] = direct
    return found


def _fetch_bytes(step: g.Step, table: ShapeTable) -> tuple[int, ...]:
    sizes = [ref.nbytes for ref in step.fetch if ref.value is None]
    ref = step.gather_rows
    if ref is not None and ref.shape:
        indices = table.shapes.get(step.node.inputs[1]) if len(step.node.inputs) > 1 else None
        rows = math.prod(indices) if indices and known(indices) else ref.shape[0]
        sizes.append(min(rows, ref.shape[0]) * (ref.nbytes // ref.shape[0]))
    return tuple(sizes)


def _held_bytes(ref) -> int:  # noqa: ANN001
    """A weight as the executor holds it: fp16 is widened to float32 unless its op decodes it."""
    if ref.dtype == np.float16 and not ref.keep_float16:
        return ref.nbytes * 2
    return ref.nbytes


def _row_stream(step: g.Step) -> tuple[int, int]:
    """The stored bytes and block count of the weight ``step`` reads itself (0, 0: none)."""
    ref = step.weight_rows
    return (ref.nbytes, len(channel_blocks(tuple(ref.shape), 0))) if ref is not None else (0, 0)


def _inherits_one_thread(steps: list[g.Step], table: ShapeTable) -> list[bool]:
    """Per step: whether it runs its products with BLAS left on one thread by an earlier step. The
    engine (``frame.engine.blas_threads``) holds BLAS on one thread for its self-splitting kernels,
    fits it to the work for other GEMM steps, and leaves it as it is for every other op,
    from its default count at the start of a run."""
    one, inherited = False, []
    for step in steps:
        op = step.node.op_type
        inherited.append(one and op not in bt.SELF_SPLITTING_OPS and op not in bt.GEMM_OPS)
        if op in bt.SELF_SPLITTING_OPS:
            one = True
        elif op in bt.GEMM_OPS:
            shapes = [table.shapes.get(name) if name else None for name in step.node.inputs[:2]]
            if all(known(shape) for shape in shapes):
                args = [np.broadcast_to(np.zeros((), np.float32), shape) for shape in shapes]
                one = bt.gemm_work(op, args) < bt.SINGLE_THREAD_WORK
    return inherited


def _step_costs(steps: list[g.Step], work: list[Work], owner: list[int | None], table: ShapeTable,
                weights: Mapping, graph_inputs: Sequence[str], describe: Describe | None) -> list[StepCost]:
    macs = [[0, 0, 0] for _ in steps]
    element = [0] * len(steps)
    for w, i in zip(work, owner):
        if i is None:
            continue
        if w.kind is None:
            element[i] += w.element_bytes
        else:
            macs[i][KINDS.index(w.kind)] += w.macs
    live = LiveBuffers(table, set(weights))
    for name in graph_inputs:
        live.add_input(name)
    held: dict[str, int] = {}
    costs = []
    one_thread = _inherits_one_thread(steps, table)
    for i, step in enumerate(steps):
        for ref in step.fetch:
            held[ref.name] = _held_bytes(ref) if ref.value is None else 0
        during = live.run(step)
        factor = step_share(step, table.shapes, weights)
        costs.append(StepCost(step.node.op_type, (macs[i][0], macs[i][1], macs[i][2]),
                              (round(macs[i][0] * factor), macs[i][1], macs[i][2]), element[i],
                              step_decoded(step, table.shapes, weights), _fetch_bytes(step, table), during,
                              sum(held.values()),  # a row-streamed weight's block: in the scratch
                              step_scratch(step, table.shapes, table.itemsizes, weights),
                              describe(step, table, weights, one_thread[i]) if describe and any(macs[i]) else None,
                              live.live_bytes(), *_row_stream(step)))
        for ref in step.release:
            held.pop(ref.name, None)
    return costs


def _read_small_weights_beside(weights: Mapping, in_proto: set[str], http: HttpSettings | None = None) -> None:
    """Give small weights stored outside the proto their values (OnnxStream keeps reshape targets,
    axes and scalars as ``.bin`` files): shape inference needs them; a few bytes each."""
    beside = (ref for name, ref in weights.items() if name not in in_proto)
    for name, value in read_small_values(beside, http, _small_limit).items():
        weights[name].value = value


def _small_limit(ref: WeightRef) -> int:
    return SMALL_INTEGER_BYTES if ref.dtype.kind in "iu" else SMALL_FLOAT_BYTES


def plan_costs(source, input_shapes: Mapping[str, Sequence[int]],  # noqa: ANN001 - path, URL or OnnxStream source
               attention_budget: int = 16 << 20, structure=None,  # noqa: ANN001
               http: HttpSettings | None = None,
               describe: Describe | None = None, precision: Callable[[list], str] | None = None) -> PlanCosts:
    """Count one evaluation of ``source`` with its inputs at ``input_shapes`` (see the module docstring).

    ``structure``: ``read_structure(source)`` if the caller has it already (it is consumed); ``http``:
    how a URL is read, as the render reads it (token, retries, weight cache; None: the defaults);
    ``describe(step, table, weights, one_blas_thread)``: what to record of each compute step for its
    timing (``StepCost.signature``); ``precision(streamed_refs)``: the name of the streamed weights'
    dtype (``PlanCosts.precision``; "fp32" without it)."""
    started = time.perf_counter()
    structure = structure if structure is not None else read_structure(source, http=http)
    read_seconds = time.perf_counter() - started
    fill_small_values(structure.proto, structure.weights, http)
    _read_small_weights_beside(structure.weights, {t.name for t in structure.proto.graph.initializer}, http)
    table = infer_shapes(structure.proto, structure.weights, structure.nodes, input_shapes)
    weights = structure.weights
    stored_weights = dict(weights)  # before planning adds the folded constants
    producers = {o: (n.op_type, n.inputs) for n in structure.nodes for o in n.outputs if o}
    work = [node_work(n, table.shapes, table.itemsizes, stored_weights, producers) for n in structure.nodes]
    unknown = sum(1 for n in structure.nodes for o in n.outputs if o and table.nbytes(o) == 0
                  and not any(d == 0 for d in (table.shapes.get(o) or (1,))))
    nodes = list(structure.nodes)
    stored = sum(ref.nbytes for ref in weights.values() if ref.value is None)
    attention = AttentionConfig(None, attention_budget)
    started = time.perf_counter()
    steps = plan_structure(structure, attention).steps  # adds the folded constants to ``weights``
    load_seconds = read_seconds + time.perf_counter() - started
    folded = {name for name, ref in weights.items() if ref.value is not None}
    owner = _step_of_nodes(nodes, steps, folded)
    graph_inputs = [v.name for v in structure.proto.graph.input if v.name not in weights]
    costs = _step_costs(steps, work, owner, table, weights, graph_inputs, describe)
    by_op: dict[str, int] = {}
    for node, w, i in zip(nodes, work, owner):
        if i is not None and w.kind is not None:
            by_op[node.op_type] = by_op.get(node.op_type, 0) + w.macs
    inputs = sum(table.nbytes(name) for name in graph_inputs)
    return PlanCosts(str(source), {k: tuple(int(d) for d in v) for k, v in input_shapes.items()}, costs,
                      stored, len(nodes), unknown, load_seconds, by_op, inputs,
                      precision(fetch_order(steps)) if precision else "fp32")  # as Model.streamed_weights


__all__ = ["Describe", "PlanCosts", "StepCost", "plan_costs"]
