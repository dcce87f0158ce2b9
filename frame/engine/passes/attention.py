"""Load-time rewrite: attention subgraphs → one ``SlicedAttention`` node (see ``sliced_attention.py``).

Matched: ``MatMul(Q, Kt) → (Mul|Div|Add by any operand)* → Softmax(axis=-1) → [Dropout] →
MatMul(·, V)``, where every intermediate feeds only the next node. That covers the exporters'
variants: TorchScript's SDPA symbolic and the dynamo/onnxscript decomposition (Q and K each scaled by
√scale and K transposed *before* the first MatMul, so those small nodes simply stay), diffusers'
legacy processor (one Mul after the MatMul) and CLIP's additive causal mask (Add). Only the
score-sized tensors disappear; everything of size heads × N × d still runs as ordinary nodes.
"""

from __future__ import annotations

import logging
from functools import partial

from frame.engine.graph import Node
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.pattern import GraphIndex, Rewrite
from frame.engine.passes.sliced_attention import COST, AttentionConfig, sliced_attention

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
SCORE_OPS = ("Mul", "Div", "Add")
PASSTHROUGH = ("Dropout", "Cast")  # identities at inference between Softmax and the second MatMul


def _is_identity(node: Node, index: GraphIndex) -> bool:
    """Dropout without training_mode or a used mask; Cast to float32 (what the probabilities are)."""
    if node.op_type == "Cast":
        return node.attrs.get("to") == 1
    extra = [o for o in node.outputs[1:] if o and index.is_used(o)]
    return not extra and len([x for x in node.inputs if x]) <= 2


def _scores(index: GraphIndex, name: str) -> tuple[list[int], list[str], list[str]] | None:
    """Walk back from a score tensor to the MatMul producing the raw scores: the nodes on the way
    (that MatMul last), the score ops and their other operands (from the MatMul on)."""
    j = index.sole_producer(name, "MatMul", *SCORE_OPS)
    if j is None:
        return None
    node = index.nodes[j]
    if node.op_type == "MatMul":
        return [j], [], []
    a, b = node.inputs[0], node.inputs[1]
    for scores, operand in ((a, b), (b, a)) if node.op_type != "Div" else ((a, b),):
        if scores == operand:
            continue
        found = _scores(index, scores)
        if found is not None:
            return [j, *found[0]], [*found[1], node.op_type], [*found[2], operand]
    return None


def _match(end: int, index: GraphIndex, softmax_opset: int) -> tuple[list[int], list[str], list[str]] | None:
    """Indices of the matched nodes (first MatMul last), score ops and their operands, for the
    final MatMul at ``end``."""
    nodes = index.nodes
    matched: list[int] = []
    i = index.sole_producer(nodes[end].inputs[0], "Softmax", *PASSTHROUGH)
    while i is not None and nodes[i].op_type in PASSTHROUGH:
        if not _is_identity(nodes[i], index):
            return None
        matched.append(i)
        i = index.sole_producer(nodes[i].inputs[0], "Softmax", *PASSTHROUGH)
    if i is None or nodes[i].attrs.get("axis", -1 if softmax_opset >= 13 else 1) != -1:
        return None
    matched.append(i)
    found = _scores(index, nodes[i].inputs[0])
    if found is None:
        return None
    return [*matched, *found[0]], found[1], found[2]


def fuse_attention(nodes: list[Node], graph_outputs: set[str], config: AttentionConfig,
                   softmax_opset: int) -> tuple[list[Node], int]:
    """``nodes`` with every attention pattern fused, and how many were."""
    index, rewrite = GraphIndex(nodes, graph_outputs), Rewrite(nodes)
    spec = OpSpec("SlicedAttention", 1, partial(sliced_attention, _config=config), DOMAIN, cost=COST)
    for end, node in enumerate(nodes):
        if node.op_type != "MatMul" or node.domain:
            continue
        found = _match(end, index, softmax_opset)
        if found is None or rewrite.taken(found[0]):
            continue
        matched, ops, operands = found
        first = nodes[matched[-1]]
        fused = Node(f"{node.name}/sliced_attention", "SlicedAttention", DOMAIN,
                     [first.inputs[0], first.inputs[1], node.inputs[1], *operands], list(node.outputs),
                     {"score_ops": tuple(ops)}, spec)
        rewrite.fuse(end, fused, matched)
    if rewrite.count:
        log.debug("fused %d attention block(s)", rewrite.count)
    return rewrite.result(), rewrite.count
