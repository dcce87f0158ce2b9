"""The plan's work and memory, counted from the costs its kernels declare (``frame.engine.ops.cost``).

The engine accounts for itself: each kernel (``frame.engine.ops``) and each fused op a pass builds
(``frame.engine.passes``) declares, where it is registered, its multiply-adds, its passes over
memory and its scratch bytes. This module only asks them, for a graph and its shapes:

* ``node_work``: one ONNX node's multiply-adds and kind (``conv``, ``matmul``, ``attention``), or for a
  memory-bound op the activation bytes it reads and writes (weights excluded: they are fetched bytes)
  times its declared passes;
* ``step_scratch``: one planned step's temporary bytes beyond its inputs and output;
* ``step_share``: the share of its ONNX nodes' multiply-adds a fused step's kernel does;
* ``step_decoded``: the weight values a step's kernel decodes to float32 per call.

``frame.engine.plan_costs`` adds them up for a whole plan; ``frame.estimate`` turns these counts
into the night's seconds and peak (rates, phases, the Pi).
"""

from __future__ import annotations

from collections.abc import Mapping

from frame.engine import graph as g
from frame.engine.ops.cost import ATTENTION, CONV, KINDS, MATMUL, OUTPUT_ONLY, Cost, CostQuery, Shape, Work, size
from frame.engine.ops.lookup import declared_cost

__all__ = ["ATTENTION", "CONV", "KINDS", "MATMUL", "Work", "node_work", "step_decoded", "step_scratch", "step_share"]


def node_work(node: g.Node, shapes: Mapping[str, Shape], itemsizes: Mapping[str, int], weights: Mapping,
              producers: Mapping[str, tuple[str, list[str]]]) -> Work:
    """MACs and kind, or the activation bytes of a memory-bound op, for one standard ONNX node; an op
    type no kernel declares (none runs it) counts as one pass over its values."""
    cost = declared_cost(node.op_type) or OUTPUT_ONLY
    if cost.work is not None:
        query = CostQuery(node.attrs, node.inputs, node.outputs, shapes, itemsizes, weights, producers)
        work = cost.work(query)
        if work is not None:
            return work
    if not cost.passes:
        return Work(None, 0, 0)
    touched = [n for n in node.inputs if n and n not in weights] + [n for n in node.outputs if n]
    moved = sum(size(shapes.get(n)) * itemsizes.get(n, 4) for n in touched)
    return Work(None, 0, round(moved * cost.passes))


def _step_query(step: g.Step, shapes: Mapping[str, Shape], itemsizes: Mapping[str, int],
                weights: Mapping) -> CostQuery:
    node = step.node
    return CostQuery(node.attrs, node.inputs, node.outputs, shapes, itemsizes, weights,
                     keywords=node.spec.keywords if node.spec is not None else {},
                     row_bytes=step.weight_rows.nbytes if step.weight_rows is not None else 0)


def _declared(step: g.Step) -> Cost | None:
    return step.node.spec.cost if step.node.spec is not None else None


def step_scratch(step: g.Step, shapes: Mapping[str, Shape], itemsizes: Mapping[str, int], weights: Mapping) -> int:
    """Temporary bytes of one planned step beyond its inputs and output, as its kernel declares them."""
    cost = _declared(step)
    if cost is None or cost.scratch is None:
        return 0
    return cost.scratch(_step_query(step, shapes, itemsizes, weights))


def step_share(step: g.Step, shapes: Mapping[str, Shape], weights: Mapping) -> float:
    """Share of the ONNX nodes' multiply-adds the step's kernel does (1 unless it declares less)."""
    cost = _declared(step)
    if cost is None or cost.share is None:
        return 1.0
    return cost.share(_step_query(step, shapes, {}, weights))


def step_decoded(step: g.Step, shapes: Mapping[str, Shape], weights: Mapping) -> int:
    """Stored weight values the step's kernel decodes to float32 per call, as it declares them."""
    cost = _declared(step)
    if cost is None or cost.decoded is None:
        return 0
    return cost.decoded(_step_query(step, shapes, {}, weights))
