"""frame.engine: a streaming pure-numpy ONNX runtime (weights fetched per op, activations freed early).

``from frame.engine import load_model`` is the entry point; the heavy modules load on first use so
``import frame.engine`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.engine.model import Model, load_model

__all__ = ["Model", "load_model"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Model": "frame.engine.model",
    "load_model": "frame.engine.model",
})
