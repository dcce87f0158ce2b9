"""The fused GEGLU feed-forward's kernel (``geglu_ff``) and what it runs from (``GegluPlan``); the
rewrite that builds it, and why it exists, is ``geglu.py`` beside this module.

``geglu_ff`` computes ``Σ_J (x · W1[:, hidden J] + b1) * gate(x · W1[:, gate J] + b1) · W2[J, :]`` over
blocks ``J`` of hidden channels (``BLOCK_BYTES`` of tokens × |J| float32 per temporary), each block's
weights decoded just before it; a weight stored (out, in) for a Gemm is sliced along its rows.
Each block's work is split by rows of tokens over the core pool (``blocks.run_tasks``): the weights
are decoded once, by the calling thread, and each thread runs both products, the gate and the
second product on its own rows, so the gate's elementwise chain runs on every core too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from frame.engine import buffers
from frame.engine.graph import Node
from frame.engine.ops.blocks import gemm_pieces, run_tasks
from frame.engine.passes.weight_decoding import decode_block

log = logging.getLogger(__name__)

BLOCK_BYTES = 8 << 20  # float32 tokens x |J| per temporary
MIN_BLOCK_CHANNELS = 256  # narrower GEMMs lose speed to BLAS thread synchronisation


@dataclass
class GegluPlan:
    """What the kernel needs besides its inputs: how to run the gate subgraph and the fallback."""

    gate_input: str  # the gate Slice's output name inside the gate subgraph
    gate_nodes: list[Node] = field(default_factory=list)
    gate_output: str = ""
    hidden_first: bool = True  # product = Mul(hidden, gate) (False: Mul(gate, hidden))
    slices: tuple = ()  # (hidden Slice kernel, gate Slice kernel), attributes bound
    constants: list[str] = field(default_factory=list)  # gate subgraph operands, in fused-input order
    dying: list[tuple[str, ...]] = field(default_factory=list)  # per gate node: values last used there

    def __post_init__(self) -> None:
        last: dict[str, int] = {}
        for k, node in enumerate(self.gate_nodes):
            for name in node.inputs:
                if name and name not in self.constants:
                    last[name] = k
        self.dying = [tuple(n for n, k in last.items() if k == position and n != self.gate_output)
                      for position in range(len(self.gate_nodes))]


# ------------------------------------------------------------------------------------------ kernel
def _weight(arrays: tuple, axis: int, start: int, stop: int, quant_axis: int, transposed: bool = False
            ) -> np.ndarray:
    """Channels ``start:stop`` along ``axis`` of the weight as MatMul reads it, (in, out); a transposed
    (out, in) weight is sliced along the other axis and handed over as a transposed view."""
    if transposed:
        return _weight(arrays, 1 - axis, start, stop, quant_axis).T
    q, scale, zero_point = arrays
    if scale is None and q.dtype == np.float32 and isinstance(q, np.ndarray):  # not a LoraStored
        index = [slice(None)] * q.ndim
        index[axis] = slice(start, stop)
        return q[tuple(index)]
    return decode_block(q, scale, zero_point, quant_axis, axis, start, stop)


def _column_range(slice_fn, slice_args: list, shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(first, length) of the columns a Slice node takes from a tensor of ``shape``, if it takes whole
    rows of a contiguous column range (probed on a zero-copy index view, never on the data)."""
    probe = np.broadcast_to(np.arange(shape[-1], dtype=np.int64), shape)
    taken = slice_fn(probe, *slice_args)
    if taken.shape[:-1] != shape[:-1] or taken.shape[-1] == 0:
        return None
    columns = taken[(0,) * (taken.ndim - 1)]
    first = int(columns[0])
    if not np.array_equal(columns, np.arange(first, first + columns.size)):
        return None
    return first, int(columns.size)


def _gate(plan: GegluPlan, gate: np.ndarray, constants: dict[str, np.ndarray]) -> np.ndarray:
    """Run the gate subgraph on one block: values freed at their last use, and kernels that can write
    into a dying input 0 do (the block's temporaries stay at one or two)."""
    env = {plan.gate_input: gate, **constants}
    del gate
    for node, dying in zip(plan.gate_nodes, plan.dying):
        args = [env[name] if name else None for name in node.inputs]
        attrs = node.attrs
        if node.spec.inplace and node.inputs[0] in dying and node.inputs.count(node.inputs[0]) == 1:
            attrs = {**attrs, "_reuse": True}
        for name in dying:
            del env[name]
        env[node.outputs[0]] = node.spec.fn(*args, **attrs)
        del args
    return env[plan.gate_output]


def geglu_ff(x: np.ndarray, w1: np.ndarray, s1: np.ndarray | None, z1: np.ndarray | None, b1: np.ndarray,
             w2: np.ndarray, s2: np.ndarray | None, z2: np.ndarray | None, b2: np.ndarray | None,
             *rest: np.ndarray | None, _plan: GegluPlan, _axes: tuple[int, int], _slice_counts: tuple[int, int],
             _transposed: tuple[bool, bool] = (False, False)) -> np.ndarray:
    """The fused node's kernel: ``MatMul(hidden * gate(gate_half), W2)``, plus ``b2`` when the second
    linear is a Gemm holding its bias (a MatMul's bias Add stays a node of its own)."""
    hidden_args = list(rest[:_slice_counts[0]])
    gate_args = list(rest[_slice_counts[0]:_slice_counts[0] + _slice_counts[1]])
    constants = dict(zip(_plan.constants, rest[_slice_counts[0] + _slice_counts[1]:]))
    first, second = (w1, s1, z1), (w2, s2, z2)
    t1, t2 = _transposed
    width, inner = w1.shape[0 if t1 else 1], w2.shape[1 if t2 else 0]
    shape = x.shape[:-1] + (width,)
    hidden = _column_range(_plan.slices[0], hidden_args, shape)
    gate = _column_range(_plan.slices[1], gate_args, shape)
    if (x.dtype != np.float32 or hidden is None or gate is None or hidden[1] != gate[1]
            or hidden[1] != inner or b1.shape not in ((width,), (1, width)) or x.ndim < 2):
        out = _unfused(x, first, second, b1, hidden_args, gate_args, constants, _plan, _axes, _transposed)
        return out if b2 is None else out + b2.astype(np.float32, copy=False)
    b1 = b1.reshape(-1).astype(np.float32, copy=False)
    channels = hidden[1]
    tokens = int(np.prod(x.shape[:-1]))
    step = max(MIN_BLOCK_CHANNELS, BLOCK_BYTES // max(1, 4 * tokens))
    rows = x.reshape(tokens, x.shape[-1])
    out = buffers.empty((tokens, w2.shape[0 if t2 else 1]))
    shares = _token_shares(tokens, rows.shape[1] * channels * 3)
    for j0 in range(0, channels, step):
        j1 = min(channels, j0 + step)
        weights = (_weight(first, 1, hidden[0] + j0, hidden[0] + j1, _axes[0], t1),
                   _weight(first, 1, gate[0] + j0, gate[0] + j1, _axes[0], t1),
                   _weight(second, 0, j0, j1, _axes[1], t2),
                   b1[hidden[0] + j0:hidden[0] + j1], b1[gate[0] + j0:gate[0] + j1])
        run_tasks([partial(_block, _plan, constants, rows[s:e], weights, out[s:e], j0 == 0) for s, e in shares])
        del weights
    out = out.reshape(x.shape[:-1] + out.shape[-1:])
    if b2 is not None:
        out += b2.astype(np.float32, copy=False)
    return out


def _token_shares(tokens: int, work_per_token: int) -> list[tuple[int, int]]:
    """Rows of tokens per thread: one share per core (``blocks.gemm_pieces``) when the block's products
    are big, each share running the whole block (products, gate, accumulation) on its own rows, so the
    temporaries add up to one unsplit block's and every element is computed as without the split."""
    pieces = max(1, min(gemm_pieces(tokens * work_per_token), tokens))
    size = -(-tokens // pieces)
    return [(s, min(s + size, tokens)) for s in range(0, tokens, size)]


def _block(plan: GegluPlan, constants: dict[str, np.ndarray], x: np.ndarray, weights: tuple, out: np.ndarray,
           first: bool) -> None:
    """One block of hidden channels over the token rows ``x``: ``out (+)= (x·Wh + bh) * gate(x·Wg + bg) · W2``."""
    wh, wg, w2, bh, bg = weights
    h = np.matmul(x, wh, out=buffers.empty((x.shape[0], wh.shape[1])))
    h += bh
    g = np.matmul(x, wg, out=buffers.empty(h.shape))
    g += bg
    g = _gate(plan, g, constants)
    product = np.multiply(h, g, out=h)  # exact either way round: h·g == g·h in IEEE arithmetic
    del h, g
    if first:
        np.matmul(product, w2, out=out)
    else:
        part = np.matmul(product, w2, out=buffers.empty(out.shape))
        out += part


def _unfused(x, first, second, b1, hidden_args, gate_args, constants, plan: GegluPlan, axes,
             transposed: tuple[bool, bool]) -> np.ndarray:
    """The original chain on whole tensors (operands the blocked form cannot prove equal for)."""
    log.debug("GegluFF: operands do not split into two column halves; running the original chain")
    t1, t2 = transposed
    w1 = _weight(first, 1, 0, first[0].shape[0 if t1 else 1], axes[0], t1)
    projected = np.matmul(x, w1) + b1
    hidden = plan.slices[0](projected, *hidden_args)
    gate = _gate(plan, plan.slices[1](projected, *gate_args), constants)
    product = hidden * gate if plan.hidden_first else gate * hidden
    return np.matmul(product, _weight(second, 0, 0, second[0].shape[1 if t2 else 0], axes[1], t2))


def shape_without(x: np.ndarray, *, _width: int, _shape_fn) -> np.ndarray:
    """``Shape`` of ``MatMul(x, W)`` (W ``_width`` columns wide) computed without that product."""
    return _shape_fn(np.broadcast_to(np.zeros((), np.float32), x.shape[:-1] + (_width,)))
