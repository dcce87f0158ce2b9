"""The graph as the runtime sees it: bound nodes in execution order and the liveness plan.

``build_nodes`` binds every node to its kernel at load (collecting *all* unsupported nodes),
``topological_order`` checks or restores producer-before-consumer order, and ``make_plan`` computes,
per step, which weights to fetch first (first use), which values die after it (last use), and whether
input 0 dies there so the kernel may overwrite it (``_reuse``). Streaming needs nothing more: a value
lives exactly from its producer (or first use, for a weight) to its last consumer.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import onnx

from frame.engine.errors import ModelFormatError
from frame.engine.io.weights import WeightRef
from frame.engine.ops.lookup import bind_node
from frame.engine.ops.registry import OpSpec, UnsupportedOp

FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16


@dataclass
class Node:
    name: str
    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict
    spec: OpSpec | None = None

    @property
    def label(self) -> str:
        return f"node {self.name!r} ({self.op_type})"


@dataclass
class Step:
    node: Node
    fetch: list[WeightRef] = field(default_factory=list)
    free: list[str] = field(default_factory=list)
    release: list[WeightRef] = field(default_factory=list)
    reuse: bool = False
    gather_rows: WeightRef | None = None  # Gather(axis 0) of a weight used only here: read needed rows
    weight_rows: WeightRef | None = None  # a block-decoded weight used only here: read block by block


def opset_table(model: onnx.ModelProto) -> dict[str, int]:
    table = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in model.opset_import}
    table.setdefault("", 1)
    return table


def build_nodes(graph: onnx.GraphProto, opsets: dict[str, int]) -> tuple[list[Node], list[str]]:
    """Every node bound to its kernel, plus one problem line per node that cannot run."""
    nodes: list[Node] = []
    problems: list[str] = []
    for i, proto in enumerate(graph.node):
        name = proto.name or f"#{i}"
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        opset = opsets.get(domain)
        node = Node(name, proto.op_type, domain, list(proto.input), list(proto.output), {})
        if opset is None:
            problems.append(f"{node.label}: domain {domain!r} is not imported by the model")
        else:
            try:
                node.spec, node.attrs = bind_node(proto, opset)
            except UnsupportedOp as exc:
                where = f"{domain}:{proto.op_type}" if domain else proto.op_type
                problems.append(f"node {name!r} ({where}, opset {opset}): {exc}")
        nodes.append(node)
    return nodes, problems


def producer_index(nodes: list[Node]) -> dict[str, int]:
    """Which node (by position) produces each value: what the load-time rewrites walk backwards on."""
    return {o: i for i, n in enumerate(nodes) for o in n.outputs if o}


def consumer_index(nodes: list[Node]) -> dict[str, list[int]]:
    """The nodes (by position, once per use) that read each value; a rewrite may only swallow a
    value that exactly one node reads."""
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for name in filter(None, node.inputs):
            consumers.setdefault(name, []).append(i)
    return consumers


def rewrite_nodes(nodes: list[Node], replacement: dict[int, Node], removed: set[int]) -> list[Node]:
    """``nodes`` with each replaced position swapped for its fused node and the removed ones dropped."""
    return [replacement.get(i, n) for i, n in enumerate(nodes) if i in replacement or i not in removed]


def topological_order(nodes: list[Node], available: set[str]) -> list[Node]:
    """``nodes`` ordered so producers come first; Kahn's algorithm always taking the lowest ready
    index, so an already sorted graph (the usual case) keeps the file's order exactly."""
    producer = {out: i for i, n in enumerate(nodes) for out in n.outputs if out}
    pending = [0] * len(nodes)
    users: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        for name in set(filter(None, node.inputs)):
            if name not in producer:
                if name in available:
                    continue
                raise ModelFormatError(f"{node.label}: input {name!r} is produced by no node and is no "
                                       "graph input or initializer")
            pending[i] += 1
            users.setdefault(producer[name], []).append(i)
    heap = [i for i, count in enumerate(pending) if count == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for j in users.get(i, []):
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(heap, j)
    if len(order) != len(nodes):
        raise ModelFormatError("the graph has a cycle")
    return [nodes[i] for i in order]


def compute_in_float32(nodes: list[Node]) -> None:
    """Rewrite float16 casts and constants to float32: fp16 graphs compute in float32 (weights are
    upcast when fetched, fp16 outputs cast back at the end), as on CPUs without fp16 arithmetic."""
    for node in nodes:
        for key, value in list(node.attrs.items()):
            if key in ("to", "dtype") and value == FLOAT16:
                node.attrs[key] = FLOAT
            elif isinstance(value, np.ndarray) and value.dtype == np.float16:
                node.attrs[key] = value.astype(np.float32)


def remove_dead_nodes(nodes: list[Node], graph_outputs: set[str]) -> list[Node]:
    """Drop nodes none of whose outputs is used (e.g. the leftovers of a fusion)."""
    while True:
        used = set(graph_outputs)
        for node in nodes:
            used.update(filter(None, node.inputs))
        alive = [n for n in nodes if any(o in used for o in n.outputs if o)]
        if len(alive) == len(nodes):
            return nodes
        nodes = alive


def make_plan(nodes: list[Node], weights: dict[str, WeightRef], graph_inputs: set[str],
              graph_outputs: set[str]) -> list[Step]:
    """Per-step fetch/free/release lists and in-place hints (see the module docstring)."""
    last_use: dict[str, int] = {}
    first_use: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for name in filter(None, node.inputs):
            last_use[name] = i
            first_use.setdefault(name, i)
    steps = [Step(node) for node in nodes]
    for i, node in enumerate(nodes):
        ref = weights.get(node.inputs[0]) if node.op_type == "Gather" and node.inputs else None
        if (ref is not None and ref.value is None and node.attrs.get("axis", 0) == 0 and ref.shape
                and first_use[ref.name] == last_use[ref.name] == i and node.inputs.count(ref.name) == 1
                and ref.name not in graph_inputs and ref.name not in graph_outputs):
            steps[i].gather_rows = ref  # e.g. a token embedding table: 152 MB, of which 77 rows are used
            del first_use[ref.name], last_use[ref.name]
    order = 0
    for name, i in sorted(first_use.items(), key=lambda item: item[1]):
        if name in weights and name not in graph_inputs:
            ref = weights[name]
            ref.index = order if ref.value is None else -1
            order += ref.value is None
            steps[i].fetch.append(ref)
    for i, node in enumerate(nodes):
        for name in filter(None, node.outputs):
            if name not in last_use and name not in graph_outputs:
                steps[i].free.append(name)  # produced but never used
    for name, i in last_use.items():
        if name in graph_outputs:
            continue
        steps[i].free.append(name)
        if name in weights and name not in graph_inputs:
            steps[i].release.append(weights[name])
    for i, step in enumerate(steps):
        first = step.node.inputs[0] if step.node.inputs else ""
        step.reuse = bool(
            first and step.node.spec is not None and step.node.spec.inplace and last_use.get(first) == i
            and first not in weights and first not in graph_inputs and first not in graph_outputs
            and step.node.inputs.count(first) == 1)
    return steps


def streamed_order(steps: list[Step]) -> list[WeightRef]:
    """The weights a provider serves, in the order the engine asks for them."""
    return [ref for step in steps for ref in step.fetch if ref.value is None]
