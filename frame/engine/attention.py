"""Sliced attention: softmax(Q·Kᵀ ∘ score ops) · V without the heads × N × N score tensor.

The fusion pass (``fusion.py``) replaces MatMul → [Mul|Div|Add]* → Softmax(-1) → [Dropout] → MatMul
with one node running ``sliced_attention``. Scores are computed for a block of heads and query rows
at a time, softmaxed in place and multiplied by V straight into the output, so peak extra memory is
one block (``AttentionConfig``). For SD 1.5 at 512² the 8 × 4096 × 4096 float32 scores would be
512 MB; with the default 16 MB budget each head is done in 4 slices of 1024 rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class AttentionConfig:
    """``slices``: query-row slices per head (None = from ``budget_bytes``, the score block size)."""

    slices: int | None = None
    budget_bytes: int = 16 << 20

    def block(self, heads: int, n: int, m: int, itemsize: int) -> tuple[int, int]:
        """(heads per block, query rows per block)."""
        if self.slices is not None:
            return 1, max(1, math.ceil(n / max(1, self.slices)))
        per_head = n * m * itemsize
        if per_head <= self.budget_bytes:
            return max(1, min(heads, self.budget_bytes // per_head)), n
        return 1, max(1, self.budget_bytes // (m * itemsize))


def _apply(op: str, s: np.ndarray, operand: np.ndarray) -> None:
    if op == "Mul":
        s *= operand
    elif op == "Div":
        s /= operand
    elif op == "Add":
        s += operand
    else:  # the fusion pass only emits the three above
        raise ValueError(f"unknown score op {op!r}")


def sliced_attention(q: np.ndarray, kt: np.ndarray, v: np.ndarray, *operands: np.ndarray,
                     score_ops: tuple[str, ...] = (), _config: AttentionConfig | None = None) -> np.ndarray:
    """``softmax(ops(q @ kt), axis=-1) @ v`` with ONNX MatMul broadcasting, computed in blocks.

    ``operands[i]`` is the second operand of ``score_ops[i]`` (a scale or an additive mask), applied
    in order to the scores.
    """
    config = _config or AttentionConfig()
    n, m = q.shape[-2], kt.shape[-1]
    dtype = np.result_type(q, kt, v, *operands)
    lead = np.broadcast_shapes(q.shape[:-2], kt.shape[:-2], v.shape[:-2])
    full = np.broadcast_shapes(lead + (n, m), *(o.shape for o in operands))
    lead = full[:-2]
    count = math.prod(lead)
    q3 = np.broadcast_to(q, lead + q.shape[-2:]).reshape(count, n, q.shape[-1])
    kt3 = np.broadcast_to(kt, lead + kt.shape[-2:]).reshape(count, kt.shape[-2], m)
    v3 = np.broadcast_to(v, lead + v.shape[-2:]).reshape(count, m, v.shape[-1])
    out = np.empty((count, n, v.shape[-1]), dtype=dtype)
    scalars = all(o.size == 1 for o in operands)
    heads, rows = config.block(count if scalars else 1, n, m, dtype.itemsize)
    if scalars and set(score_ops) <= {"Mul", "Div"}:
        # (q·s) @ kt == s·(q @ kt): scale the small Q block, not the large score block
        factor = np.ones((), dtype)
        for op, operand in zip(score_ops, operands):
            factor = factor * operand.reshape(()) if op == "Mul" else factor / operand.reshape(())
        score_ops, operands, q3 = (), (), q3 * factor.astype(dtype)
    if scalars:
        flat = [o.reshape(()).astype(dtype) for o in operands]
        for h0 in range(0, count, heads):
            for r0 in range(0, n, rows):
                block = (slice(h0, h0 + heads), slice(r0, r0 + rows))
                _block(q3[block], kt3[h0:h0 + heads], v3[h0:h0 + heads], score_ops, flat, out[block])
    else:
        full_ops = [np.broadcast_to(o, full) for o in operands]
        for h, idx in enumerate(np.ndindex(*lead)):
            for r0 in range(0, n, rows):
                ops_here = [o[idx][r0:r0 + rows] for o in full_ops]
                _block(q3[h, r0:r0 + rows], kt3[h], v3[h], score_ops, ops_here, out[h, r0:r0 + rows])
    return out.reshape(lead + (n, v.shape[-1]))


def _block(q: np.ndarray, kt: np.ndarray, v: np.ndarray, score_ops, operands, out: np.ndarray) -> None:
    """One block: scores, score ops, exp(s - max) in place, then (e @ v) / Σe.

    Normalising the (rows × d) result instead of the (rows × M) probabilities saves a full pass
    over the score block; the result is the same softmax(s) @ v.
    """
    s = np.matmul(q, kt)
    for op, operand in zip(score_ops, operands):
        _apply(op, s, operand)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    total = s.sum(axis=-1, keepdims=True)
    np.matmul(s, v, out=out)
    out /= total
