"""Load-time rewrite: ``Mul(x, Sigmoid(x))`` (SiLU/Swish, as every exporter writes it) → one node.

Unfused, the sigmoid is a second activation-sized array alive next to ``x`` until the Mul: 256 MB
at the VAE decoder's 512×512 × 256-channel resnets. The fused kernel works through ``x`` in small
chunks, writing into ``x`` itself when ``x`` dies there (``_reuse``), so no full-size temporary
exists at all.
"""

from __future__ import annotations

import numpy as np

from frame.engine.graph import Node
from frame.engine.ops.blocks import map_row_blocks
from frame.engine.ops.cost import OUTPUT_ONLY
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.pattern import GraphIndex, Rewrite

DOMAIN = "frame.engine"
CHUNK = 1 << 16  # elements per block: its 256 KB temporary stays in cache


def silu_block(x: np.ndarray, out: np.ndarray) -> None:
    """One cache-sized block; ``out`` may be ``x``. exp overflow gives inf, whose quotient is the limit 0."""
    t = np.negative(x)
    np.exp(t, out=t)
    t += 1
    np.divide(x, t, out=out)


def silu(x: np.ndarray, _reuse: bool = False) -> np.ndarray:
    """``x * sigmoid(x)`` computed as ``x / (1 + exp(-x))``, in ``CHUNK``-element blocks spread over the
    cores (``ops.blocks``: numpy releases the GIL in its loops), so no full-size temporary exists."""
    if x.dtype.kind != "f":
        raise TypeError(f"SiLU needs a float input, got {x.dtype}")
    src = np.ascontiguousarray(x)
    out = src if _reuse and src is x and x.flags.writeable else np.empty_like(src)
    flat_in, flat_out = src.reshape(-1), out.reshape(-1)
    whole = flat_in.size - flat_in.size % CHUNK
    with np.errstate(over="ignore"):
        if whole:
            map_row_blocks(silu_block, flat_in[:whole].reshape(-1, CHUNK), flat_out[:whole].reshape(-1, CHUNK))
        if whole < flat_in.size:
            silu_block(flat_in[whole:], flat_out[whole:])
    return out


SILU_SPEC = OpSpec("SiLU", 1, silu, DOMAIN, inplace=True, cost=OUTPUT_ONLY)


def fuse_silu(nodes: list[Node], graph_outputs: set[str]) -> tuple[list[Node], int]:
    """``nodes`` with each Sigmoid → Mul(x, ·) pair replaced by one SiLU node, and the count."""
    index, rewrite = GraphIndex(nodes, graph_outputs), Rewrite(nodes)
    for i, node in enumerate(nodes):
        if node.op_type != "Mul" or node.domain or len(node.inputs) != 2:
            continue
        for x, s in (node.inputs, node.inputs[::-1]):
            j = index.sole_producer(s, "Sigmoid")
            if j is not None and nodes[j].inputs[0] == x and x != s:
                rewrite.fuse(i, Node(f"{node.name}/silu", "SiLU", DOMAIN, [x], list(node.outputs), {}, SILU_SPEC), [j])
                break
    return rewrite.result(), rewrite.count
