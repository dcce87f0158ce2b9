"""How long one evaluation takes: each engine step's compute, and reading its weights alongside.

Compute of a step (seconds) =
    Σ_kind engine_macs[kind] / rate(signature or kind)      (conv, matmul, attention)
  + memory traffic / stream rate                             (skipped where the probe runs the
                                                              same fused work: attention's softmax,
                                                              NormConv's GroupNorm, GegluFF's GELU)
  + fixed cost per step
  + weight values decoded × decode cost                     (fp16/8-bit weights decoded inside the
                                                              op, block by block: measured apart,
                                                              and the probes' rates net of it)

Weights are read by the provider the night uses (``frame.engine.providers``): ``prefetch`` (disk)
and ``http`` read ahead in fetch order on a thread while the ops compute, up to a budget of bytes
read but not yet asked for (the providers' defaults: 16 MB on disk, 32 MB over HTTP; on disk 32 MB
for a component whose counted peak leaves room, ``frame.diffusion.readahead``); a weight
bigger than the budget is read when its op asks for it, and a row-streamed one (``WeightRows``:
fp16/8-bit weights of 4 MB and more) by its op, block by block, the next block while one computes
(``frame.engine.passes.weight_rows``). ``simulate`` replays that policy step by step: the reader
reads weight k as soon as it is free and the read-ahead bytes allow, an op starts when its weights
are in and the previous op is done; an op's own row reads start with it once the storage is free
(one storage: the read-ahead waits for them) and its n blocks pipeline, so it takes
r/n + (n - 1) · max(c/n, r/n) + c/n for compute c and reads r.
``nocache`` reads on request (no overlap); ``ram`` reads every weight once (the first evaluation
pays it all). The result is the finishing time of the last op. A shared run of the guidance passes
(``items=2``) is one such evaluation whose ops each compute twice.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from frame.engine.costs import KINDS
from frame.engine.plan_costs import PlanCosts, StepCost
from frame.engine.providers.http import HttpPrefetch
from frame.engine.providers.prefetch import Prefetch
from frame.estimate.machine import Throughput


def _provider_budgets() -> dict[str, int]:
    """Read-ahead bytes of each provider, from the engine's own defaults."""
    def default(cls: type) -> int:
        return int(inspect.signature(cls.__init__).parameters["budget_bytes"].default)

    return {"prefetch": default(Prefetch), "http": default(HttpPrefetch), "nocache": 0}


PROVIDER_BUDGET = _provider_budgets()


@dataclass(frozen=True)
class EvaluationTime:
    seconds: float        # wall time of one evaluation, reads included
    compute: float        # the ops alone
    read: float           # the weight reads alone (bytes / read rate)

    @property
    def stall(self) -> float:
        """Time the ops waited for weights."""
        return max(0.0, self.seconds - self.compute)


def step_compute(step: StepCost, rates: Throughput, items: int = 1) -> float:
    """Seconds of one step for ``items`` inputs: each computes; its weight is decoded once for all
    (``decoded_weight_items``: the executor decodes a shared run's weight block once for its items)."""
    seconds = rates.step_seconds
    for kind, macs in zip(KINDS, step.engine_macs):
        if macs:
            seconds += macs / rates.macs_rate(step.signature if step.signature and step.signature.kind == kind
                                              else None, kind)
    if step.element_bytes and not _rate_includes_elementwise(step, rates):
        seconds += step.element_bytes / rates.stream_bytes
    storage = step.signature.storage if step.signature is not None else "fp32"
    return seconds * items + step.decoded_elements * rates.decode_cost(storage)


def _rate_includes_elementwise(step: StepCost, rates: Throughput) -> bool:
    """Attention's probes all run the softmax it fuses; a NormConv's or GegluFF's only its own op's
    probes (their GroupNorm/SiLU or GELU), so without one the traffic is added at the stream rate."""
    signature = step.signature
    if signature is None:
        return False
    return signature.kind == "attention" or (signature.fuses_elementwise and rates.probed_like(signature))


def simulate(computes: Sequence[float], fetches: Sequence[Sequence[int]], read_rate: float | None,
             budget: int | None, rows: Sequence[tuple[int, int]] | None = None) -> float:
    """Finishing time of ops ``computes`` whose weights ``fetches`` are read at ``read_rate`` B/s by a
    read-ahead reader with ``budget`` bytes (None: read on request, no overlap); ``rows``: per op, the
    (bytes, blocks) of a weight it reads itself, block by block (``StepCost.row_bytes``)."""
    if not read_rate:
        return sum(computes)
    engine = reader = 0.0
    requested: deque[tuple[float, int]] = deque()  # (time the op asked for it, bytes), in fetch order
    for op, (compute, sizes) in enumerate(zip(computes, fetches)):
        ready = engine
        pending: list[int] = []
        for size in sizes:
            if budget is None or size > budget:
                start = max(reader, engine)  # read when the op asks for it
            else:
                start = _budget_start(reader, size, budget, requested, pending)
            reader = start + size / read_rate
            ready = max(ready, reader)
            pending.append(size)
            while requested and requested[0][0] <= reader:  # asked for before the reader got here
                requested.popleft()
        row_bytes, blocks = rows[op] if rows is not None else (0, 0)
        if row_bytes:
            start = max(ready, reader)  # the op's first block, once the read-ahead is off the storage
            reader = start + row_bytes / read_rate
            engine = start + pipelined(compute, row_bytes / read_rate, blocks)
        else:
            engine = ready + compute
        requested.extend((ready, size) for size in pending)
    return engine


def pipelined(compute: float, read: float, blocks: int) -> float:
    """Seconds of an op that reads its weight in ``blocks`` equal blocks, each block's compute
    beside the next block's read: the first read, then the longer of the two per block, then the
    last compute."""
    n = max(1, blocks)
    return read / n + (n - 1) * max(compute, read) / n + compute / n


def _budget_start(reader: float, size: int, budget: int, requested: deque[tuple[float, int]],
                  pending: list[int]) -> float:
    """Earliest time ≥ ``reader`` at which read-ahead bytes (read, not yet asked for) + ``size`` fit
    the budget. Weights of the current op count as read ahead until it starts."""
    ahead = sum(pending)
    start = reader
    # weights of earlier ops asked for after ``start`` are still read ahead at ``start``
    later = [(t, s) for t, s in requested if t > start]
    ahead += sum(s for _, s in later)
    for asked, freed in later:
        if ahead + size <= budget:
            break
        start, ahead = asked, ahead - freed
    return start


def evaluation_time(count: PlanCosts, rates: Throughput, read_rate: float | None = None,
                    provider: str = "prefetch", first: bool = True, items: int = 1,
                    budget: int | None = None) -> EvaluationTime:
    """One evaluation of ``count`` at ``rates``; weights read at ``read_rate`` through ``provider``
    (``ram``: only the ``first`` evaluation reads). ``items`` > 1: that many inputs run through each op
    while its weights are held (``Model.run_shared``): each op computes ``items`` times, its weights
    are read once, and the read-ahead overlaps them as for one evaluation. ``budget``: the provider's
    read-ahead bytes tonight (``frame.diffusion.readahead``; None: its default)."""
    computes = [step_compute(s, rates, items) for s in count.steps]
    fetches = [s.fetches for s in count.steps]
    total_read = sum(sum(f) for f in fetches) + sum(s.row_bytes for s in count.steps)
    if provider == "ram" and not first:
        return EvaluationTime(sum(computes), sum(computes), 0.0)
    # a row-streamed weight is read by its op, block by block beside its kernel calls (once for all
    # items of a shared run)
    rows = [(s.row_bytes, s.row_blocks) for s in count.steps]
    budget = budget or PROVIDER_BUDGET.get(provider, PROVIDER_BUDGET["prefetch"])
    seconds = simulate(computes, fetches, read_rate, None if provider in ("nocache", "ram") or not budget else budget,
                       rows)
    return EvaluationTime(seconds, sum(computes), total_read / read_rate if read_rate else 0.0)
