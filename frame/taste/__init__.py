"""frame.taste: learn what the owner likes and pick tonight's theme.

``IKNNClassifier`` is an interpretable kNN ensemble (see docs/iknn.md); ``ThemePicker`` builds on it.
Names are resolved lazily so ``import frame.taste`` does not import scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.taste.classifier import IKNNClassifier
    from frame.taste.explain import Explanation
    from frame.taste.features import DEFAULT_AXES, Candidate, PromptFeatures
    from frame.taste.picker import Choice, TasteSettings, ThemePicker
    from frame.taste.ratings import Rating

__all__ = ["Candidate", "Choice", "DEFAULT_AXES", "Explanation", "IKNNClassifier", "PromptFeatures", "Rating",
           "TasteSettings", "ThemePicker"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Candidate": "frame.taste.features",
    "Choice": "frame.taste.picker",
    "DEFAULT_AXES": "frame.taste.features",
    "Explanation": "frame.taste.explain",
    "IKNNClassifier": "frame.taste.classifier",
    "PromptFeatures": "frame.taste.features",
    "Rating": "frame.taste.ratings",
    "TasteSettings": "frame.taste.picker",
    "ThemePicker": "frame.taste.picker",
})
