"""Graph attributes (If branches, Loop and Scan bodies) as bound, validated and planned ``Body`` objects.

Load: ``bind_bodies`` walks a graph's nodes; every graph attribute becomes a ``Body`` whose nodes
are bound exactly like the main graph's (every problem reported, prefixed with where it is), whose
initializers are ``WeightRef``\\ s streamed through the provider like any other weight, and whose
*outer names* (values it reads from enclosing graphs, nested bodies included) are appended to the
owning node's inputs. That one step keeps the rest of the loader unchanged: the enclosing plan keeps
those values alive until the node has run, topological order puts their producers first, dead-node
removal sees them used, and no fusion can swallow a value a body still reads.

Run: the executor hands control-flow kernels a ``Scope`` (the ``_scope`` hint, ``frame.engine.executor``);
``Scope.run`` executes a body's plan in an environment of its own, seeded with the outer values and the formal inputs.
Inside a loop the body's weights are fetched on the first iteration and held until the loop ends
(``Scope.holding``), instead of being read again on every iteration.

Graphs are numbered in pre-order, the same walk ``protobuf_index`` makes over the file's bytes, so a
body's initializers find their byte ranges whatever their names.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import onnx

from frame.engine import graph as g
from frame.engine.errors import EngineError, ModelFormatError
from frame.engine.io.weights import WeightRef, collect_weights, numpy_dtype
from frame.engine.passes.const_fold import fold_constants

if TYPE_CHECKING:
    from frame.engine.io.protobuf_index import ScannedModel

GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


@dataclass(eq=False)
class Body:
    """One graph attribute: its formal inputs/outputs, bound nodes, own weights and outer names."""

    where: str                   # for messages: "node 'If_3' (If) then_branch"
    inputs: list[str]
    outputs: list[str]
    nodes: list[g.Node]
    weights: dict[str, WeightRef]
    outer: list[str]             # names read from enclosing graphs, in first-use order
    output_types: list[tuple[np.dtype, tuple | None]]  # declared (dtype, dims): empty Loop/Scan outputs
    steps: list[g.Step] = field(default_factory=list)

    def compile(self) -> None:
        """Order, float32-rewrite, fold and plan the body (and the bodies nested in it) like the main graph."""

        compile_bodies(self.nodes)
        available = set(self.inputs) | set(self.weights) | set(self.outer)
        nodes = g.topological_order(self.nodes, available)
        g.compute_in_float32(nodes)
        nodes = fold_constants(nodes, self.weights, set(self.outputs))
        nodes = g.remove_dead_nodes(nodes, set(self.outputs))
        self.steps = g.make_plan(nodes, self.weights, set(self.inputs) | set(self.outer), set(self.outputs))


def graph_attributes(proto: onnx.NodeProto) -> Iterator[tuple[str, int, onnx.GraphProto]]:
    """(attribute name, position in a GRAPHS list or -1, graph) in the order the file stores them."""
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, -1, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for i, graph in enumerate(attr.graphs):
                yield attr.name, i, graph


def node_bodies(node: g.Node) -> Iterator[Body]:
    for value in node.attrs.values():
        if isinstance(value, Body):
            yield value
        elif isinstance(value, list) and value and isinstance(value[0], Body):
            yield from value


def _declared(value: onnx.ValueInfoProto, where: str) -> tuple[np.dtype, tuple | None]:
    kind = value.type.WhichOneof("value")
    if kind not in (None, "tensor_type"):
        raise ModelFormatError(f"{where}: {value.name!r} is a {kind.replace('_type', '')} value; sequence, "
                               "map and optional values are not supported (tensors only)")
    tensor = value.type.tensor_type
    dtype = numpy_dtype(tensor.elem_type, f"{where} value {value.name!r}") if tensor.elem_type else np.dtype(
        np.float32)
    if not tensor.HasField("shape"):
        return dtype, None
    return dtype, tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)


class BodyBinder:
    """Binds every graph attribute of a model, numbering graphs as ``protobuf_index`` does."""

    def __init__(self, source: str, scanned: ScannedModel, opsets: dict[str, int]) -> None:
        self.source = source
        self.embedded = scanned.subgraph_embedded
        self.opsets = opsets
        self.numbers = itertools.count(1)

    def bind(self, graph: onnx.GraphProto, nodes: list[g.Node], problems: list[str]) -> None:
        """Replace graph attributes of ``nodes`` (bound from ``graph``) with ``Body`` objects, append
        their outer names to the nodes' inputs, and add every problem found inside to ``problems``."""
        for proto, node in zip(graph.node, nodes):
            found: dict[str, list[Body]] = {}
            for name, _, sub in graph_attributes(proto):
                where = f"{node.label} {name}"
                number = next(self.numbers)
                try:
                    body = self._body(sub, number, where, problems)
                except (EngineError, ValueError) as exc:  # a malformed body: report it with the rest
                    problems.append(f"{where}: {exc}")
                    continue
                found.setdefault(name, []).append(body)
            if not found or node.spec is None:
                continue
            for name, bodies in found.items():
                node.attrs[name] = bodies if isinstance(node.attrs.get(name), list) else bodies[0]
            for body in itertools.chain.from_iterable(found.values()):
                node.inputs.extend(n for n in body.outer if n not in node.inputs)

    def _body(self, graph: onnx.GraphProto, number: int, where: str, problems: list[str]) -> Body:
        weights = collect_weights(graph, self.source, self.embedded.get(number, {}))
        nodes, inner = g.build_nodes(graph, self.opsets)
        problems.extend(f"{where}: {problem}" for problem in inner)
        nested: list[str] = []
        self.bind(graph, nodes, nested)
        problems.extend(f"{where}: {problem}" for problem in nested)
        inputs = [v.name for v in graph.input if v.name not in weights]
        outputs = [v.name for v in graph.output]
        types = [_declared(v, where) for v in graph.output]
        for value in graph.input:
            _declared(value, where)
        defined = set(inputs) | set(weights) | {o for n in nodes for o in n.outputs if o}
        used = [name for n in nodes for name in n.inputs if name] + outputs
        outer = [name for name in dict.fromkeys(used) if name not in defined]
        return Body(where, inputs, outputs, nodes, weights, outer, types)


def compile_bodies(nodes: list[g.Node]) -> None:
    for node in nodes:
        for body in node_bodies(node):
            body.compile()


def fetch_order(steps: list[g.Step]) -> list[WeightRef]:
    """Every streamed weight in the order a run asks for it, bodies' weights at their node's step,
    with ``ref.index`` set to that position (the provider's read-ahead follows it)."""
    order: list[WeightRef] = []

    def walk(plan: list[g.Step]) -> None:
        for step in plan:
            order.extend(ref for ref in step.fetch if ref.value is None)
            for body in node_bodies(step.node):
                walk(body.steps)

    walk(steps)
    for i, ref in enumerate(order):
        ref.index = i
    return order
