"""``Runnable``: what the diffusion pipeline calls on a loaded component, written down once.

frame's engine ``Model`` is one; ``frame.serve.render.engines.OrtModel`` wraps an onnxruntime
``InferenceSession`` into another, so the pipeline runs either without asking which it holds. Each
member is what a call site reads: the declared ``inputs``/``outputs`` (feeds are built from them),
``run`` (``rng`` reaches a VAE encoder's random op, ``overrides`` a text encoder's token rows),
``run_shared`` with ``shares_weight_reads`` (several feeds in one pass over the weights: the
"shared" guidance mode and the taste picker's texts), ``op_counts`` (an encoder that samples),
``streamed_weights`` (the UNet's precision), ``lora_report``, ``fetch_stats`` (bytes per step),
``token_table`` (textual inversion), ``set_readahead``, ``override_input_shape`` and ``close``.
An engine that has no such thing answers plainly (an empty count, None, False) instead of lacking
the member, so no caller probes for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from frame.engine.io.fetch_stats import FetchSnapshot
    from frame.engine.io.weights import WeightRef
    from frame.engine.lora.matching import MatchReport
    from frame.engine.planned import TensorInfo

Progress = Callable[[float], None]
Feeds = Mapping[str, np.ndarray]


@runtime_checkable
class Runnable(Protocol):
    """A loaded ONNX component, ready to run; one ``run`` at a time, ``close`` when done."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    op_counts: Mapping[str, int]          # nodes per op type
    streamed_weights: Sequence[WeightRef]  # the weights each run reads, in order (empty: held by the engine)
    lora_report: MatchReport | None        # what the LoRAs given at load changed (None: none given)
    shares_weight_reads: bool              # run_shared reads each weight once for all its feeds

    @property
    def fetch_stats(self) -> FetchSnapshot | None:
        """Bytes read so far per kind of source; None when the engine does not count them."""

    def run(self, feeds: Feeds, progress: Progress | None = None, rng: object | None = None,
            overrides: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None) -> dict[str, np.ndarray]:
        """Outputs by name for ``feeds``."""

    def run_shared(self, feeds: list[Feeds], progress: Progress | None = None) -> list[dict[str, np.ndarray]]:
        """``run`` for each of ``feeds``, the same outputs as separate runs."""

    def token_table(self, input_name: str = "input_ids") -> tuple[str, int | None] | None:
        """(output name, row width) of the table ``input_name`` looks tokens up in; None: not found."""

    def set_readahead(self, budget_bytes: int) -> bool:
        """Read weights ahead within ``budget_bytes``; False when the engine reads nothing ahead."""

    def override_input_shape(self, name: str, shape: tuple[int | str | None, ...]) -> None:
        """Accept feeds of ``shape`` for input ``name`` instead of the declared shape."""

    def close(self) -> None:
        """Release the component's files and memory."""
