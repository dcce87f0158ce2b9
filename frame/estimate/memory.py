"""The worker's memory peak, modelled from the count (the engine's streaming peak).

peak of one component = BASE_BYTES                       Python, numpy, onnx and frame's engine imported
                      + STRUCTURE_BYTES_PER_NODE × nodes  the loaded graph and its plan
                      + max over steps of
                          live activations                (``frame.estimate.buffers``)
                        + weights held by the step        (fp16 widened unless decoded in the op)
                        + the kernel's scratch            (``frame.estimate.scratch``)
                        + provider read-ahead             (below)
                        + ALLOCATOR_SHARE × live           heap the allocator keeps from the ops'
                                                           small temporaries (more with bigger tensors)
                      + ALLOCATOR_BYTES

Read-ahead: the prefetching providers hold weights read but not yet used, up to their budget
(32 MB disk, 64 MB HTTP); a weight bigger than the budget is never read ahead, so after step *i*
the reader can only hold the weights that follow up to the next big one: the model takes, per step,
the sizes of the next weights in fetch order while they fit the budget and are each below it.
``ram`` holds every weight (as stored). ``nocache`` holds nothing ahead.

The night's peak is the largest component's plus PIPELINE_BYTES (what the render worker holds
beyond a fresh process: PIL, the pipeline, heap left by the text encoders), plus TASTE_BYTES when the
taste model (scikit-learn, scipy) was imported earlier in the same worker to choose the prompt.
Checked against VmHWM per component and for whole renders in ``benchmarks/estimate_vs_render.py``
(docs/estimate.md).
"""

from __future__ import annotations

from frame.estimate.counting import GraphCount

MB = 1 << 20
BASE_BYTES = 46 * MB               # VmRSS with numpy, onnx and frame.engine imported (measured, x86-64)
STRUCTURE_BYTES_PER_NODE = 2200    # +10 MB for the 4493-node SD 1.5 UNet, +2.3 MB for its text encoder
ALLOCATOR_BYTES = 6 * MB           # median RSS above the live arrays with no read-ahead (SD 1.5 UNet)
ALLOCATOR_SHARE = 0.10             # RSS above live arrays grows with them: SD 1.5 UNet batch 2, VAE tile
TASTE_BYTES = 79 * MB              # scikit-learn + scipy in the worker (README, "Footprint on the Pi")
PIPELINE_BYTES = 28 * MB           # a render worker beyond a fresh process (calibrated: docs/estimate.md)
BUDGETS = {"prefetch": 32 << 20, "auto": 32 << 20, "http": 64 << 20, "nocache": 0}


def provider_for(weights: str, url: bool) -> str:
    """The provider a night uses for ``model.weights`` (``auto`` = prefetch, over HTTP for a URL)."""
    if weights in ("auto", "prefetch"):
        return "http" if url else "prefetch"
    return weights


def readahead_bytes(count: GraphCount, provider: str) -> list[int]:
    """Bytes the provider may hold read ahead while each step runs (see the module docstring)."""
    budget = BUDGETS.get(provider, 0)
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


def component_peak(count: GraphCount, provider: str = "prefetch") -> int:
    """Process peak (bytes) while ``count``'s model runs in a fresh worker."""
    ahead = readahead_bytes(count, provider)
    steps = max((s.resident_bytes + a + round(ALLOCATOR_SHARE * s.live_bytes)
                 for s, a in zip(count.steps, ahead)), default=0)
    return BASE_BYTES + STRUCTURE_BYTES_PER_NODE * count.node_count + steps + ALLOCATOR_BYTES
