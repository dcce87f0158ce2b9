"""Sliced attention: softmax(Q·Kᵀ ∘ score ops) · V without the heads × N × N score tensor.

The fusion pass (``attention.py`` in this package) replaces MatMul → [Mul|Div|Add]* → Softmax(-1) → [Dropout] → MatMul
with one node running ``sliced_attention``. Scores are computed for a block of heads and query rows
at a time, softmaxed in place and multiplied by V straight into the output, so peak extra memory is
one block per thread (``AttentionConfig``; all threads' blocks together stay within its budget).
For SD 1.5 at 512² the 8 × 4096 × 4096 float32 scores would be 512 MB.

Speed (SD 1.5 UNet, one core): blocks are cache-sized (``BLOCK_BYTES``) and each thread reuses
one score buffer for all its blocks (a fresh 16 MB block per slice cost 4 000 page faults); the
blocks are shared out over the cores with BLAS on one thread per core, so the softmax passes run
in parallel too. Scalar scales are folded into Q, the row sums are a matrix-vector product (2.5×
faster than numpy's pairwise sum over 4096-long rows) and the normalisation is applied to the
(rows × d) output. When the keys are few (cross-attention over 77 text tokens) the scores are
computed transposed, keys × queries, so the max and sum reduce across rows, vectorised along the
queries, instead of along 77-long rows (3.7 → 0.5 ms for the max over 8 × 4096 × 77).

The row max is subtracted only when a block needs it (``_shift_needed``): softmax is the same ratio
exp(s)/Σexp(s) with or without the shift, which only keeps exp in float32's range. When every row max
of a block lies within ``SAFE_SCORE``, exp(s), the row sums and Σexp(s)·v cannot overflow and the
terms that matter stay normal floats, so the pass that subtracts it is skipped (a third of the
softmax passes' time on a 256 × 4096 block; 266 → 250 ms for 8 heads × 4096 × 40 on one thread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from frame.engine import buffers
from frame.engine.ops.blocks import gemm_pieces, run_tasks
from frame.engine.ops.cost import FLOAT, Cost, CostQuery, has_dims

BLOCK_BYTES = 4 << 20  # per thread: 256 query rows × 4096 keys; 1 MB to 16 MB measured within 5 %
TRANSPOSED_MAX_KEYS = 256  # fewer keys than this: scores as keys × queries (see the module docstring)
# |row max| below which exp(s) is taken unshifted: e^60 x keys x |v| stays far below float32's 3.4e38
# (checked per call against the keys and V's largest value), and a row whose max is -60 keeps every
# term within 20 of it above float32's smallest normal, e^-87
SAFE_SCORE = 60.0
FLOAT32_MAX_EXP = 88.0


@dataclass
class AttentionConfig:
    """``slices``: query-row slices per head (None = from ``budget_bytes``, the score block size)."""

    slices: int | None = None
    budget_bytes: int = 16 << 20

    def block(self, heads: int, n: int, m: int, itemsize: int, threads: int = 1) -> tuple[int, int]:
        """(heads per block, query rows per block) for ``threads`` threads each holding one block."""
        if self.slices is not None:
            return 1, max(1, math.ceil(n / max(1, self.slices)))
        budget = max(1, min(self.budget_bytes // max(1, threads), BLOCK_BYTES))
        per_head = n * m * itemsize
        if per_head <= budget:
            return max(1, min(heads, budget // per_head)), n
        return 1, max(1, budget // (m * itemsize))


def _apply(op: str, s: np.ndarray, operand: np.ndarray) -> None:
    if op == "Mul":
        s *= operand
    elif op == "Div":
        s /= operand
    elif op == "Add":
        s += operand
    else:  # the fusion pass only emits the three above
        raise ValueError(f"unknown score op {op!r}")


def _fold_scalar_scale(q3: np.ndarray, score_ops, operands, dtype) -> tuple[np.ndarray, tuple, tuple]:
    """(q·s) @ kt == s·(q @ kt): scale the small Q, not the large score block."""
    factor = np.ones((), dtype)
    for op, operand in zip(score_ops, operands):
        factor = factor * operand.reshape(()) if op == "Mul" else factor / operand.reshape(())
    return q3 * factor.astype(dtype), (), ()


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
    out = buffers.empty((count, n, v.shape[-1]), dtype)
    scalars = all(o.size == 1 for o in operands)
    if scalars and set(score_ops) <= {"Mul", "Div"}:
        q3, score_ops, operands = _fold_scalar_scale(q3, score_ops, operands, dtype)
    pieces = gemm_pieces(count * n * m * q.shape[-1])
    heads, rows = config.block(count if scalars else 1, n, m, dtype.itemsize, pieces)
    blocks = [(h0, min(h0 + heads, count), r0, min(r0 + rows, n))
              for h0 in range(0, count, heads) for r0 in range(0, n, rows)]
    if scalars:
        flat = [o.reshape(()).astype(dtype) for o in operands]
        per_block = [(block, flat) for block in blocks]
    else:
        full_ops = [np.broadcast_to(o, full).reshape(count, n, m) for o in operands]
        per_block = [(block, [o[block[0], block[2]:block[3]] for o in full_ops]) for block in blocks]
    transposed = scalars and not score_ops and m < TRANSPOSED_MAX_KEYS and config.slices is None
    ones = np.ones((m, 1), dtype)
    limit = unshifted_limit(m, v)

    def run(share) -> None:
        scratch = buffers.empty(heads * rows * m, dtype)  # one score buffer per thread, reused
        for (h0, h1, r0, r1), ops_here in share:
            target = out[h0:h1, r0:r1]
            if transposed:
                _block_transposed(q3[h0:h1, r0:r1], kt3[h0:h1], v3[h0:h1], target, scratch, limit)
            else:
                _block(q3[h0:h1, r0:r1], kt3[h0:h1], v3[h0:h1], score_ops, ops_here, target, scratch, ones, limit)

    size = -(-len(per_block) // min(pieces, len(per_block)))
    run_tasks([lambda s=s: run(per_block[s:s + size]) for s in range(0, len(per_block), size)])
    return out.reshape(lead + (n, v.shape[-1]))


def unshifted_limit(keys: int, v: np.ndarray) -> float:
    """The largest |row max| for which exp(s) needs no shift: ``SAFE_SCORE``, less where ``keys`` terms
    of e^max times V's largest value would come near float32's overflow."""
    largest = max(float(v.max()), -float(v.min())) if v.size else 0.0  # |v|'s max without an |v| copy
    if not math.isfinite(largest):
        return 0.0  # NaN or inf in V: shift always, as softmax does
    room = FLOAT32_MAX_EXP - math.log(max(1, keys)) - math.log(max(1.0, largest)) - 1.0
    return max(0.0, min(SAFE_SCORE, room))


def _shift_needed(peak: np.ndarray, limit: float) -> bool:
    """Whether a block's row maxima ``peak`` leave the unshifted exp's safe range (or are not finite)."""
    return not (float(peak.max()) <= limit and float(peak.min()) >= -limit)


def _block(q: np.ndarray, kt: np.ndarray, v: np.ndarray, score_ops, operands, out: np.ndarray,
           scratch: np.ndarray, ones: np.ndarray, limit: float) -> None:
    """One block (heads, rows): scores, score ops, exp(s [- max]) in place, then (e @ v) / Σe.

    Normalising the (rows × d) result instead of the (rows × M) probabilities saves a full pass
    over the score block; the result is the same softmax(s) @ v.
    """
    heads, rows, m = q.shape[0], q.shape[1], kt.shape[-1]
    s = scratch[:heads * rows * m].reshape(heads, rows, m)
    np.matmul(q, kt, out=s)
    for op, operand in zip(score_ops, operands):
        _apply(op, s, operand)
    peak = s.max(axis=-1, keepdims=True)
    if _shift_needed(peak, limit):
        s -= peak
    np.exp(s, out=s)
    total = np.matmul(s, ones)
    np.matmul(s, v, out=out)
    out /= total


def _block_transposed(q: np.ndarray, kt: np.ndarray, v: np.ndarray, out: np.ndarray, scratch: np.ndarray,
                      limit: float) -> None:
    """One block with few keys: scores as (heads, keys, rows) so max and sum reduce over axis 1."""
    heads, rows, m = q.shape[0], q.shape[1], kt.shape[-1]
    s = scratch[:heads * rows * m].reshape(heads, m, rows)
    np.matmul(kt.transpose(0, 2, 1), q.transpose(0, 2, 1), out=s)
    peak = s.max(axis=1, keepdims=True)
    if _shift_needed(peak, limit):
        s -= peak
    np.exp(s, out=s)
    total = s.sum(axis=1)[..., None]
    np.matmul(s.transpose(0, 2, 1), v, out=out)
    out /= total


def _scratch(query: CostQuery) -> int:
    """One score block (heads × query rows × keys, within the config's budget), for a scalar scale the
    scaled copy of Q, and with a batch of two the copies of Q, Kᵀ and V that flattening (batch, heads)
    out of their transposed views makes."""
    config = query.keywords.get("_config") or AttentionConfig()
    q, kt = query.shape(0), query.shape(1)
    if not has_dims(q) or not has_dims(kt) or len(q) < 2 or len(kt) < 2:  # type: ignore[arg-type]
        return 0
    n, m = q[-2], kt[-1]  # type: ignore[index]
    count = math.prod(q[:-2]) if len(q) > 2 else 1  # type: ignore[arg-type, index]
    operands = [query.shapes.get(name) for name in query.inputs[3:]]
    scalars = all(has_dims(s) and math.prod(s) == 1 for s in operands)  # type: ignore[arg-type]
    heads, rows = config.block(count if scalars else 1, n, m, FLOAT)  # type: ignore[arg-type]
    scaled_q = query.nbytes(query.inputs[0]) if scalars and operands else 0
    # (batch, heads, ...) operands arrive as transposed views: flattening two leading dims > 1 copies them
    copies = sum(query.nbytes(name) for name in query.inputs[:3]) if sum(d > 1 for d in q[:-2]) > 1 else 0  # type: ignore[index, operator]
    return heads * rows * m * FLOAT + scaled_q + copies  # type: ignore[operator]


COST = Cost(scratch=_scratch)
