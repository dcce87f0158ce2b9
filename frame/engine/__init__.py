"""frame.engine: a streaming pure-numpy ONNX runtime (weights fetched per op, activations freed early).

``from frame.engine import load_model`` is the entry point; the heavy modules load on first use so
``import frame.engine`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frame.engine.model import Model

__all__ = ["load_model", "Model"]


def load_model(source: str, weights: Any = "prefetch", attention_slices: int | None = None,
               attention_budget_bytes: int = 16 << 20) -> Model:
    """See ``frame.engine.model.load_model``."""
    from frame.engine import ops  # noqa: F401  (fills the kernel registry)
    from frame.engine.model import load_model as _load

    return _load(source, weights, attention_slices, attention_budget_bytes)


def __getattr__(name: str) -> Any:
    if name == "Model":
        from frame.engine.model import Model

        return Model
    raise AttributeError(name)
