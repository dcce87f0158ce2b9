"""Load-time reordering: a narrowing 1×1 conv that is the last reader of a big activation runs early.

A resnet whose channel count drops (every VAE and UNet up block's first resnet: 256 → 128 channels,
or a UNet skip concat of 960 → 320) keeps its input ``x`` alive to the very end for
``conv_shortcut(x) + h``, while ``norm2 → conv2`` run on ``h``: at the VAE's 256×256 stage of a
32×32-latent tile that is 64 MB of ``x`` next to the 32 MB ``h``, the conv's output and its band.
The shortcut only needs ``x`` and its weights, so it can run right after the previous reader of
``x`` (``conv1``); ``x`` then dies there and only the shortcut's output, a fraction of ``x``'s size,
waits for the final Add.

Moved: a Conv (plain, or with its weight decoded in blocks) with a 1×1 kernel, stride 1, no padding,
whose weight is an initializer with fewer output than input channels (so its output is smaller than
its input), which is the last reader of its input, and whose other inputs are initializers. Nothing
else moves, and the moved node still comes after everything it reads, so results are unchanged.
"""

from __future__ import annotations

import logging

from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.passes.pattern import GraphIndex

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"


def _conv_attrs(node: Node) -> dict | None:
    """The conv attributes of a plain Conv or of a DecodedWeight node wrapping one, else None."""
    if node.domain == "" and node.op_type == "Conv":
        return node.attrs
    if node.domain == DOMAIN and node.op_type == "DecodedWeight" and node.spec is not None:
        kernel = node.spec.keywords.get("_kernel")
        if getattr(kernel, "func", None) is not None and getattr(kernel.func, "__name__", "") == "conv":
            return kernel.keywords
    return None


def _narrowing_pointwise(node: Node, weights: dict[str, WeightRef]) -> bool:
    attrs = _conv_attrs(node)
    ref = weights.get(node.inputs[1]) if attrs is not None and len(node.inputs) > 1 else None
    if ref is None or len(ref.shape) != 4 or tuple(ref.shape[2:]) != (1, 1) or ref.shape[0] >= ref.shape[1]:
        return False
    if attrs.get("group", 1) != 1 or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return False
    return (attrs.get("strides") in (None, [1, 1]) and not any(attrs.get("pads") or [])
            and attrs.get("dilations") in (None, [1, 1]))


def hoist_narrowing_convs(nodes: list[Node], weights: dict[str, WeightRef], graph_inputs: set[str]
                          ) -> tuple[list[Node], int]:
    """``nodes`` with each qualifying conv moved to just after the previous reader of its input."""
    index = GraphIndex(nodes)
    moves: dict[int, int] = {}  # node position -> the position it now runs right after
    for i, node in enumerate(nodes):
        if not node.inputs or not _narrowing_pointwise(node, weights):
            continue
        x = node.inputs[0]
        uses = index.readers(x)
        others = [n for n in node.inputs[1:] if n]
        if x in graph_inputs or uses[-1] != i or len(uses) < 2 or any(n not in weights for n in others):
            continue
        after = uses[-2]
        if after < i - 1 and after not in moves and after not in moves.values():
            moves[i] = after
    if not moves:
        return nodes, 0
    order: list[Node] = []
    pending = {after: i for i, after in moves.items()}
    for i, node in enumerate(nodes):
        if i in moves:
            continue
        order.append(node)
        if i in pending:
            order.append(nodes[pending[i]])
    log.debug("moved %d narrowing 1x1 conv(s) next to their input's previous reader", len(moves))
    return order, len(moves)
