"""frame.taste: learn what the owner likes and pick tonight's theme.

``IKNNClassifier`` is an interpretable kNN ensemble (see docs/iknn.md); ``ThemePicker`` builds on it.
Names are resolved lazily so ``import frame.taste`` does not import scikit-learn.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "IKNNClassifier": "frame.taste.classifier",
    "Explanation": "frame.taste.explain",
    "Candidate": "frame.taste.features",
    "PromptFeatures": "frame.taste.features",
    "DEFAULT_AXES": "frame.taste.features",
    "Rating": "frame.taste.ratings",
    "ThemePicker": "frame.taste.picker",
    "TasteSettings": "frame.taste.picker",
    "Choice": "frame.taste.picker",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'frame.taste' has no attribute {name!r}")
