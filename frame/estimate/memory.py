"""The worker's memory peak, modelled from the count (the engine's streaming peak).

peak of one component = BASE_BYTES                       Python, numpy, onnx and frame's engine imported
                      + STRUCTURE_BYTES_PER_NODE × nodes  the loaded graph and its plan
                      + max over steps of
                          live activations                (``frame.engine.live_buffers``)
                        + weights held by the step        (fp16 widened unless decoded in the op)
                        + the kernel's scratch            (declared: ``frame.engine.costs``)
                        + provider read-ahead             (below)
                        + ALLOCATOR_SHARE × live           heap the allocator keeps from the ops'
                                                           small temporaries (more with bigger tensors)
                      + ALLOCATOR_BYTES

Read-ahead: the prefetching providers hold weights read but not yet used, up to their budget
(the providers' defaults: 16 MB disk, 32 MB HTTP; 32 MB on disk for a component whose counted peak
leaves room for it, ``frame.diffusion.readahead``); a weight bigger than the budget is never read
ahead, so after step *i* the reader can only hold the weights that follow up to the next big one:
the model takes, per step, the sizes of the next weights in fetch order while they fit the budget
and are each below it. A row-streamed weight (read by its op, block by block) is held one stored
block at a time, beside its decoded block (``counting``).
``ram`` holds every weight (as stored). ``nocache`` holds nothing ahead.

Guidance passes in "shared" mode (``Model.run_shared``: each op runs both passes while its weights
are held) keep both passes' activations alive: ``other_items_bytes`` adds, per step, what the other
pass holds at that point of the engine's loop; weights, read-ahead and scratch count once.

The night's peak is the largest component's plus PIPELINE_BYTES (what the render worker holds
beyond a fresh process: PIL, the pipeline, heap left by the text encoders). The taste model
(scikit-learn, scipy) adds nothing: it runs in its own short child, which exits before any component
loads (``frame.worker.tastechild``).
Checked against VmHWM per component and for whole renders in ``benchmarks/estimate_vs_render.py``
(docs/estimate.md).
"""

from __future__ import annotations

from frame.engine.plan_costs import PlanCosts
from frame.estimate.timing import PROVIDER_BUDGET

MB = 1 << 20
BASE_BYTES = 46 * MB               # VmRSS with numpy, onnx and frame.engine imported (measured, x86-64)
STRUCTURE_BYTES_PER_NODE = 2200    # +10 MB for the 4493-node SD 1.5 UNet, +2.3 MB for its text encoder
ALLOCATOR_BYTES = 6 * MB           # median RSS above the live arrays with no read-ahead (SD 1.5 UNet)
ALLOCATOR_SHARE = 0.10             # RSS above live arrays grows with them: SD 1.5 UNet batch 2, VAE tile
PIPELINE_BYTES = 28 * MB           # a render worker beyond a fresh process (calibrated: docs/estimate.md)
BUDGETS = dict(PROVIDER_BUDGET)  # the engine providers' defaults


def provider_for(weights: str, url: bool) -> str:
    """The provider the engine builds for the provider name ``weights`` (the configuration's "auto"
    is resolved once, by ``frame.diffusion.configured``): prefetch reads over HTTP for a URL."""
    return "http" if url and weights == "prefetch" else weights


def readahead_bytes(count: PlanCosts, provider: str, budget: int | None = None) -> list[int]:
    """Bytes the provider may hold read ahead while each step runs (see the module docstring);
    ``budget``: its read-ahead bytes where tonight's differ from its default (``frame.diffusion.readahead``)."""
    budget = budget if budget is not None and BUDGETS.get(provider) else BUDGETS.get(provider, 0)
    sizes = [s.fetches for s in count.steps]
    if provider == "ram":
        return [count.stored_weight_bytes] * len(sizes)
    if not budget:
        return [0] * len(sizes)
    flat = [size for step in sizes for size in step]
    positions, position = [], 0
    for step in sizes:
        position += len(step)
        positions.append(position)
    ahead = []
    for next_weight in positions:
        total = 0
        for size in flat[next_weight:]:
            if size > budget or total + size > budget:
                break
            total += size
        ahead.append(total)
    return ahead


def other_items_bytes(count: PlanCosts, items: int) -> list[int]:
    """Activations the other items of a shared run hold while one item runs each step.

    ``Executor.run_shared`` runs step *i* for item 0, frees its dead values, then for item 1: while
    item 0 runs it, item 1 holds what was alive before step *i*; while item 1 runs it, item 0 holds
    what is alive after step *i*. So each step adds the larger of the two, once per extra item."""
    if items <= 1:
        return [0] * len(count.steps)
    before = [count.input_bytes] + [s.kept_bytes for s in count.steps[:-1]]
    return [(items - 1) * max(b, s.kept_bytes) for b, s in zip(before, count.steps)]


def component_peak(count: PlanCosts, provider: str = "prefetch", items: int = 1, budget: int | None = None) -> int:
    """Process peak (bytes) while ``count``'s model runs in a fresh worker; ``items`` > 1: that many
    inputs run through each op while its weights are held (the guidance passes' "shared" mode: the
    weights, read-ahead and scratch once, the activations of every item); ``budget``: the provider's
    read-ahead bytes (None: its default)."""
    ahead = readahead_bytes(count, provider, budget)
    others = other_items_bytes(count, items)
    steps = max((s.resident_bytes + o + a + round(ALLOCATOR_SHARE * (s.live_bytes + o))
                 for s, o, a in zip(count.steps, others, ahead)), default=0)
    return BASE_BYTES + STRUCTURE_BYTES_PER_NODE * count.node_count + steps + ALLOCATOR_BYTES
