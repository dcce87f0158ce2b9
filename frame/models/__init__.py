"""Models shipped inside the package: the tiny random-weight demo model (``frame/models/demo``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.models.bundled import (
        DEFAULT_STEPS_KEY,
        DEMO_DEFAULT_STEPS,
        DEMO_SOURCE,
        demo_model_path,
        is_demo_model,
        resolve_model_source,
    )

__all__ = ["DEFAULT_STEPS_KEY", "DEMO_DEFAULT_STEPS", "DEMO_SOURCE", "demo_model_path", "is_demo_model",
           "resolve_model_source"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "DEFAULT_STEPS_KEY": "frame.models.bundled",
    "DEMO_DEFAULT_STEPS": "frame.models.bundled",
    "DEMO_SOURCE": "frame.models.bundled",
    "demo_model_path": "frame.models.bundled",
    "is_demo_model": "frame.models.bundled",
    "resolve_model_source": "frame.models.bundled",
})
