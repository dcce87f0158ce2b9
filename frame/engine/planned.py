"""What planning a model produces (``Planned``) and the graph's declared inputs and outputs (``TensorInfo``).

Both are plain records: ``frame.engine.model`` makes them, ``frame.engine.plan_format`` writes them to a
kept plan file and rebuilds them from one, field by field.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: dims are ints, symbolic names (str) or None (unknown); dtype None when
    the model declares no type at all (allowed for outputs, as onnxruntime does)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str | None, ...] | None


@dataclass
class Planned:
    """A model as ``load_model`` plans it, before a weights provider is attached (``Model``'s state)."""

    weights: dict
    inputs: list
    outputs: list
    op_counts: Counter
    lora_report: Any
    rewrites: dict
    steps: list
    deltas: dict = field(default_factory=dict)  # LoRA changes (a model with LoRAs is never kept)
