"""The graph index every fusion pass matches on, and the checks they all make.

A fusion may only swallow a value that nothing else sees: one use, and not a graph output. Each pass
walks a chain or small DAG of op types from a node it starts at, backwards through producers or
forwards through readers, and asks the same questions on the way: which node produces this value,
which single node reads it, is this operand a constant and which one. ``GraphIndex`` answers them
for one node list; a pass builds it once, over the list it was given, and matches on positions in
that list; ``Rewrite`` collects the fused nodes at those positions and makes the new list once, at
the end, so the index stays true while the pass matches.

Op types are matched in the default domain unless a check says otherwise (``domain=None``: any),
since the engine's own fused nodes (``frame.engine``) are other ops with their own kernels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from frame.engine.graph import Node, consumer_index, producer_index, rewrite_nodes
from frame.engine.io.weights import WeightRef


def other_operand(node: Node, name: str) -> str | None:
    """The input of a two-input node that is not ``name``; None unless the node reads ``name`` once."""
    if len(node.inputs) != 2 or node.inputs.count(name) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


class GraphIndex:
    """Producers, readers, graph outputs and weights of one node list, for matching patterns in it.

    ``consumers`` lists a reader once per use (a node reading a value twice is there twice), so a
    value with one entry has one use. Positions refer to ``nodes`` as given.
    """

    def __init__(self, nodes: list[Node], outputs: set[str] | None = None,
                 weights: dict[str, WeightRef] | None = None) -> None:
        self.nodes = nodes
        self.outputs: set[str] = outputs if outputs is not None else set()
        self.weights: dict[str, WeightRef] = weights if weights is not None else {}
        self.producer = producer_index(nodes)
        self.consumers = consumer_index(nodes)

    # ---------------------------------------------------------------------------------- uses
    def is_used(self, name: str) -> bool:
        """Read by a node or a graph output: a value a rewrite must keep producing."""
        return bool(self.consumers.get(name)) or name in self.outputs

    def private(self, name: str) -> bool:
        """One use and no graph output: the value may disappear into a fused node."""
        return len(self.consumers.get(name, [])) == 1 and name not in self.outputs

    def readers(self, name: str) -> list[int]:
        """The distinct nodes reading ``name``, in order."""
        return list(dict.fromkeys(self.consumers.get(name, [])))

    def internal_readers(self, name: str) -> list[int]:
        """The readers of ``name`` once per use, or none if it is a graph output."""
        return [] if name in self.outputs else self.consumers.get(name, [])

    # ---------------------------------------------------------------------------------- ops
    @staticmethod
    def is_op(node: Node, op_types: tuple[str, ...], domain: str | None = "") -> bool:
        """``node`` is one of ``op_types`` (any op if none are given) in ``domain`` (None: any)."""
        return (not op_types or node.op_type in op_types) and (domain is None or node.domain == domain)

    def producer_of(self, name: str, *op_types: str, domain: str | None = "") -> int | None:
        """The node producing ``name`` if it is one of ``op_types``, whoever else reads the value."""
        i = self.producer.get(name)
        return i if i is not None and self.is_op(self.nodes[i], op_types, domain) else None

    def sole_producer(self, name: str, *op_types: str, domain: str | None = "") -> int | None:
        """``producer_of``, and only if ``name`` is private to its one reader."""
        return self.producer_of(name, *op_types, domain=domain) if self.private(name) else None

    def input_from(self, node: Node, *op_types: str) -> tuple[int, str] | None:
        """The first input of ``node`` with a ``sole_producer`` of ``op_types``: (producer, input)."""
        for name in node.inputs:
            i = self.sole_producer(name, *op_types)
            if i is not None:
                return i, name
        return None

    def sole_reader(self, name: str, *op_types: str) -> int | None:
        """The one node that reads private ``name``, if it is one of ``op_types`` (default domain)."""
        readers = self.internal_readers(name)
        if len(readers) != 1 or (op_types and not self.is_op(self.nodes[readers[0]], op_types)):
            return None
        return readers[0]

    # ---------------------------------------------------------------------------------- constants
    def inline(self, name: str) -> np.ndarray | None:
        """The value of an initializer held in the graph (inline or folded), not of a streamed one."""
        ref = self.weights.get(name)
        return None if ref is None or ref.value is None else np.asarray(ref.value)

    def value(self, name: str) -> np.ndarray | None:
        """The value of a constant the graph holds: an inline initializer or a ``Constant`` node's
        (a streamed weight's value is only known per run)."""
        ref = self.weights.get(name)
        if ref is not None:
            return ref.value
        i = self.producer_of(name, "Constant")
        value = self.nodes[i].attrs.get("value") if i is not None else None
        return value if isinstance(value, np.ndarray) else None

    def scalar(self, name: str) -> float | None:
        """The number an inline one-element initializer holds (an exporter's ε, ½, √2), else None."""
        value = self.inline(name)
        return None if value is None or value.size != 1 else float(value.reshape(()))

    def is_scalar(self, name: str) -> bool:
        """``name`` is a one-element weight (streamed or not) or ``Constant``."""
        ref = self.weights.get(name)
        if ref is not None:
            return math.prod(ref.shape) == 1
        i = self.producer_of(name, "Constant")
        value = self.nodes[i].attrs.get("value") if i is not None else None
        return isinstance(value, np.ndarray) and value.size == 1


class Rewrite:
    """What a pass has decided for the positions of its ``GraphIndex``: fused nodes taking the place
    of a matched node, and the matched nodes that go with them."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.replaced: dict[int, Node] = {}
        self.removed: set[int] = set()
        self.count = 0  # fusions, each one ``fuse``

    def fuse(self, at: int, node: Node, removed: Iterable[int] = ()) -> None:
        """``node`` runs at position ``at`` instead of the node there; ``removed`` positions go."""
        self.replaced[at] = node
        self.removed.update(removed)
        self.count += 1

    def replace(self, at: int, node: Node) -> None:
        """``node`` runs at ``at`` as a consequence of a fusion (a rewritten reader), not counted."""
        self.replaced[at] = node

    def taken(self, positions: Iterable[int]) -> bool:
        """Is any of ``positions`` already replaced or removed by an earlier match?"""
        return any(i in self.removed or i in self.replaced for i in positions)

    def result(self) -> list[Node]:
        """The node list with every decision applied."""
        return rewrite_nodes(self.nodes, self.replaced, self.removed)
