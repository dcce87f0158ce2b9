"""Load-time constant folding: nodes whose inputs are all known become inline constants.

Exported small models are full of nodes that compute the same value on every run: ``Constant``
(308 of the 566 nodes of PaddleOCR's text-direction classifier, 341 in silero-vad) and chains on
them (Unsqueeze → Concat → Reshape targets, Cast of a constant, Range over constants). Each costs
a step of the run loop per run; a voice-activity model called every 32 ms pays it thousands of
times. Folding evaluates such a node once, with its own kernel, and replaces its outputs by inline
``WeightRef``\\ s (``value`` set), which the plan hands to consumers without a provider.

Only small results are kept (``MAX_FOLDED_BYTES``): a folded tensor stays in memory for the model's
lifetime, so a large computed constant is better recomputed than held (the streaming engine's
bargain). Nodes with graph attributes, random ops and nodes reading streamed weights are never
folded: the first depend on runtime values, the second must differ per run, and the third would
load a weight at load time.
"""

from __future__ import annotations

import logging

import numpy as np

from frame.engine import graph as g
from frame.engine.io.weights import WeightRef

log = logging.getLogger(__name__)

MAX_FOLDED_BYTES = 64 << 10
_NEVER = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli")


def _foldable(node: g.Node, known: dict[str, np.ndarray]) -> bool:
    if node.spec is None or node.domain or node.op_type in _NEVER or "_scope" in node.spec.hints:
        return False  # control flow (If/Loop/Scan) runs bodies that may read anything
    return all(not name or name in known for name in node.inputs)


def fold_constants(nodes: list[g.Node], weights: dict[str, WeightRef], keep: set[str]) -> list[g.Node]:
    """``nodes`` without the ones computed here; their outputs are added to ``weights`` as inline
    constants. ``keep`` (graph outputs) are never folded away, so they stay produced by a node."""
    known = {name: ref.value for name, ref in weights.items() if ref.value is not None}
    remaining: list[g.Node] = []
    folded = 0
    for node in nodes:
        if not _foldable(node, known) or any(o in keep for o in node.outputs):
            remaining.append(node)
            continue
        args = [known[name] if name else None for name in node.inputs]
        while args and args[-1] is None:
            args.pop()
        try:
            with np.errstate(all="ignore"):
                result = node.spec.fn(*args, **node.attrs)
        except Exception:  # a node that fails on its constants fails at run time, with its name
            remaining.append(node)
            continue
        results = result if isinstance(result, tuple) else (result,)
        arrays = [np.asarray(r) for r in results]
        if len(arrays) < len([o for o in node.outputs if o]) or sum(a.nbytes for a in arrays) > MAX_FOLDED_BYTES:
            remaining.append(node)
            continue
        for name, array in zip(node.outputs, arrays):
            if name:
                array = np.array(array)  # owns its data: no view into another constant
                array.flags.writeable = False
                known[name] = array
                weights[name] = WeightRef(name, array.dtype, array.shape, value=array, length=array.nbytes)
        folded += 1
    if folded:
        log.debug("folded %d constant node(s)", folded)
    return remaining
