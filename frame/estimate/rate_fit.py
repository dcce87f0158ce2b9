"""How measured rates carry to the steps no probe measured: averages per op and kind, and per op a
line of seconds per multiply-add against weight reuse (``op_costs``), used by ``machine.Throughput``.

Split from ``frame.estimate.machine`` (which measures) because this part is arithmetic on the
measurements only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from frame.estimate.signature import Signature

WEIGHT_BOUND_REUSE_RATIO = 4.0  # reuse of the heaviest over the weight-bound one, to probe both


def weighted_averages(rates: dict[Signature, float], weights: dict[Signature, float],
                       key: Callable[[Signature], str]) -> dict[str, float]:
    """Per ``key`` of the probed signatures, their multiply-add-weighted rate (total work / total time)."""
    work: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for signature, rate in rates.items():
        macs = weights.get(signature, 1.0)
        work[key(signature)] = work.get(key(signature), 0.0) + macs
        seconds[key(signature)] = seconds.get(key(signature), 0.0) + macs / rate
    return {k: work[k] / seconds[k] for k in work if seconds[k] > 0}


def op_averages(rates: dict[Signature, float], weights: dict[Signature, float]) -> dict[str, float]:
    return weighted_averages(rates, weights, lambda s: s.op)


def op_costs(rates: dict[Signature, float], weights: dict[Signature, float]) -> dict[str, tuple[float, float]]:
    """Per op whose probes reuse their weights to different degrees (the most by at least
    ``WEIGHT_BOUND_REUSE_RATIO`` times the least), the line through their seconds per multiply-add
    against 1 / ``weight_reuse``, fitted by least squares weighted by each signature's multiply-adds:
    (seconds per multiply-add, seconds per weight value and item). Ops whose probes cannot separate
    the two, or whose fit has a negative term, keep their average rate (``op_averages``)."""
    by_op: dict[str, list[tuple[float, float, float]]] = {}
    for signature, rate in rates.items():
        reuse = weight_reuse(signature)
        if reuse and rate > 0:
            by_op.setdefault(signature.op, []).append((1.0 / reuse, 1.0 / rate, weights.get(signature, 1.0)))
    costs = {}
    for op, points in by_op.items():
        inverse = [x for x, _, _ in points]
        if len(points) < 2 or max(inverse) < WEIGHT_BOUND_REUSE_RATIO * min(inverse):
            continue
        total = sum(w for _, _, w in points)
        mean_x = sum(x * w for x, _, w in points) / total
        mean_y = sum(y * w for _, y, w in points) / total
        var = sum(w * (x - mean_x) ** 2 for x, _, w in points)
        per_weight = sum(w * (x - mean_x) * (y - mean_y) for x, y, w in points) / var
        per_mac = mean_y - per_weight * mean_x
        if per_weight > 0 and per_mac > 0:
            costs[op] = (per_mac, per_weight)
    return costs


def weight_reuse(signature: Signature) -> int:
    """Multiply-adds per weight value for one input: a conv's output pixels, a product's rows; 0 for
    ops without a weight (attention)."""
    if signature.kind == "conv" and len(signature.shapes) >= 2 and len(signature.shapes[0]) == 4:
        _, _, h, w = signature.shapes[0]
        if signature.op == "upsample_conv":
            return 4 * h * w
        strides = tuple(signature.attr("strides") or (1, 1))
        return max(1, h // int(strides[0])) * max(1, w // int(strides[-1]))
    if signature.kind == "matmul" and signature.shapes and signature.shapes[0]:
        return int(np.prod(signature.shapes[0][:-1]))
    return 0


def kind_averages(rates: dict[Signature, float], weights: dict[Signature, float],
                   fallback: dict[str, float] | float) -> dict[str, float]:
    """Per kind, the multiply-add-weighted rate of the probed signatures (total work / total time);
    kinds without a probe take ``fallback`` (a rate, or a rate per kind)."""
    averages = weighted_averages(rates, weights, lambda s: s.kind)
    for kind in ("conv", "matmul", "attention"):
        averages.setdefault(kind, fallback[kind] if isinstance(fallback, dict) else fallback)
    return averages
