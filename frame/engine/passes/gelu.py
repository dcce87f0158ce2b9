"""Load-time rewrites for the transformer's elementwise tail: exact GELU (and GEGLU) as one node, and
commutative ops reordered so they can work in place.

* **GELU.** Exporters write ``gelu(x) = x · 0.5 · (1 + erf(x / √2))`` as five nodes
  (Div or Mul, Erf, Add, Mul, Mul; the 0.5 in either place). Each makes a pass over an
  activation-sized array and most allocate one: SD 1.5's feed-forward runs them on 4096 × 1280
  floats (21 MB) sixteen times per UNet evaluation. The fused ``Gelu`` node does all of it in
  cache-sized row blocks on the core pool. When its only reader is a ``Mul`` by another tensor of
  the same shape (GEGLU: ``hidden · gelu(gate)``), that product is fused too (``GeluMul``). The
  scalars must be inline constants (``Constant`` nodes, as TorchScript writes them): streamed
  initializers are not read at load time.
* **Commuting.** ``Add(bias, x)`` (how TorchScript exports ``Linear``) cannot reuse ``x``'s buffer
  because kernels only overwrite input 0; swapping the operands of an Add or Mul whose second input
  dies there and whose first does not makes the op in place (IEEE addition and multiplication are
  commutative, so the result is bit-identical).
"""

from __future__ import annotations

import math

import numpy as np

from frame.engine import buffers
from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.ops.blocks import MIN_PARALLEL_BYTES, run_tasks, workers
from frame.engine.ops.cost import passes
from frame.engine.ops.registry import OpSpec
from frame.engine.ops.unary import erf
from frame.engine.passes.pattern import GraphIndex, Rewrite, other_operand

DOMAIN = "frame.engine"
# Rows of x per block: erf is ~25 numpy calls per block, so blocks smaller than this spend more on
# call overhead than they gain in cache (4096 x 1280, one core: 128 KB blocks 27 ms, 512 KB 14 ms).
GELU_BLOCK_BYTES = 512 << 10
_SQRT_HALF = 1 / math.sqrt(2)


def _gelu_block(x: np.ndarray, out: np.ndarray, hidden: np.ndarray | None) -> None:
    """``out = [hidden ·] x · 0.5 · (1 + erf(x / √2))`` for one block; ``out`` may be ``x``."""
    t = x * np.float32(_SQRT_HALF)
    erf(t, out=t)
    t += 1
    t *= x
    t *= np.float32(0.5)
    if hidden is not None:
        t *= hidden
    out[...] = t


def gelu(x: np.ndarray, hidden: np.ndarray | None = None) -> np.ndarray:
    """Exact (erf) GELU of float32 ``x``, times ``hidden`` if given, in row blocks over the cores."""
    if x.dtype != np.float32 or (hidden is not None and (hidden.shape != x.shape or hidden.dtype != x.dtype)):
        result = x.astype(np.float32) * 0.5 * (1 + erf(x.astype(np.float32) * np.float32(_SQRT_HALF)))
        return (result if hidden is None else result * hidden).astype(np.result_type(x, *(
            [hidden] if hidden is not None else [])), copy=False)
    out = buffers.empty(x.shape, np.float32)
    if x.size == 0:
        return out
    rows_x = x.reshape(-1, x.shape[-1])
    rows_h = None if hidden is None else hidden.reshape(-1, x.shape[-1])
    rows_out = out.reshape(rows_x.shape)
    per_block = max(1, GELU_BLOCK_BYTES // max(1, x.shape[-1] * 4))

    def run(start: int, stop: int) -> None:
        with np.errstate(all="ignore"):
            for r in range(start, stop, per_block):
                end = min(r + per_block, stop)
                _gelu_block(rows_x[r:end], rows_out[r:end], None if rows_h is None else rows_h[r:end])

    rows = rows_x.shape[0]
    count = min(workers(), -(-rows // per_block)) if x.nbytes >= MIN_PARALLEL_BYTES else 1
    share = -(-rows // max(1, count))
    run_tasks([lambda s=s: run(s, min(s + share, rows)) for s in range(0, rows, share)])
    return out


COST = passes(4.0)  # as the ONNX Gelu: erf, its products and the sum each pass over the values
GELU_SPEC = OpSpec("Gelu", 1, gelu, DOMAIN, cost=COST)
GELU_MUL_SPEC = OpSpec("GeluMul", 1, gelu, DOMAIN, cost=COST)


def _match_gelu(erf_at: int, index: GraphIndex) -> tuple[str, list[int], int] | None:
    """(x, matched node indices, index of the last node) for the GELU around the Erf at ``erf_at``."""
    nodes = index.nodes
    scale_at = index.producer.get(nodes[erf_at].inputs[0])
    if scale_at is None or index.sole_reader(nodes[erf_at].inputs[0]) != erf_at:
        return None
    scale = nodes[scale_at]
    x, constant = scale.inputs[0], index.scalar(scale.inputs[1]) if len(scale.inputs) == 2 else None
    if scale.domain or constant is None or not (
            (scale.op_type == "Div" and abs(constant - math.sqrt(2)) < 1e-6)
            or (scale.op_type == "Mul" and abs(constant - _SQRT_HALF) < 1e-6)):
        return None
    chain, name, seen = [scale_at, erf_at], nodes[erf_at].outputs[0], {"one": False, "x": False, "half": False}
    while not all(seen.values()):
        at = index.sole_reader(name, "Add", "Mul")
        if at is None:
            return None
        operand = other_operand(nodes[at], name)
        value = None if operand is None else index.scalar(operand)
        step = ("one" if nodes[at].op_type == "Add" and value == 1.0 else
                "half" if nodes[at].op_type == "Mul" and value == 0.5 else
                "x" if nodes[at].op_type == "Mul" and operand == x else None)
        if step is None or seen[step] or (step != "one" and not seen["one"]):
            return None
        seen[step] = True
        chain.append(at)
        name = nodes[at].outputs[0]
    return x, chain, chain[-1]


def fuse_gelu(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]) -> tuple[list[Node], int]:
    """``nodes`` with every erf GELU (and a GEGLU product right after it) as one node, and the count."""
    index, rewrite = GraphIndex(nodes, graph_outputs, weights), Rewrite(nodes)
    for i, node in enumerate(nodes):
        if node.op_type != "Erf" or node.domain or i in rewrite.removed:
            continue
        found = _match_gelu(i, index)
        if found is None:
            continue
        x, chain, last = found
        out = nodes[last].outputs[0]
        reader = index.sole_reader(out, "Mul")
        if reader is not None and other_operand(nodes[reader], out) not in (None, x):
            product = nodes[reader]
            hidden = other_operand(product, out)
            chain.append(reader)
            fused = Node(f"{product.name}/geglu", "GeluMul", DOMAIN, [x, hidden], list(product.outputs), {},
                         GELU_MUL_SPEC)
        else:
            fused = Node(f"{nodes[last].name}/gelu", "Gelu", DOMAIN, [x], [out], {}, GELU_SPEC)
        rewrite.fuse(chain[-1], fused, chain[:-1])
    return rewrite.result(), rewrite.count


def commute_for_reuse(nodes: list[Node], weights: dict[str, WeightRef], graph_inputs: set[str],
                      graph_outputs: set[str]) -> int:
    """Swap the operands of Add/Mul nodes whose second input dies there and whose first does not
    (in place; ``nodes`` is the final execution order). Returns how many were swapped."""
    last_use: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for name in filter(None, node.inputs):
            last_use[name] = i
    kept = set(weights) | graph_inputs | graph_outputs
    swapped = 0
    for i, node in enumerate(nodes):
        if node.op_type not in ("Add", "Mul") or node.domain or len(node.inputs) != 2:
            continue
        a, b = node.inputs
        if a == b or not a or not b:
            continue
        a_dies = last_use.get(a) == i and a not in kept
        b_dies = last_use.get(b) == i and b not in kept
        if b_dies and not a_dies:
            node.inputs = [b, a]
            swapped += 1
    return swapped
