"""Structured explanations of one prediction of an :class:`IKNNClassifier`.

An explanation lists, for every voting subspace, the two features by name, their cross-validated
score and vote weight, the k nearest training rows (ids, labels, values and distances in original
units), the subspace's vote and its contribution to the final class distribution, plus a sentence a
person can read ("on warmth × realism, 7 of your 8 most similar rated pictures were liked").
Everything converts to plain JSON types with :meth:`Explanation.to_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from frame.taste import combine

DEFAULT_SENTENCE = "on {space}, {count} of the {k} most similar training rows were {label}"


def plain(value: Any) -> Any:
    """Numpy scalars → Python scalars so explanations serialise with ``json.dumps``."""
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class Neighbour:
    """One of the k nearest training rows in a subspace. ``distance`` is Euclidean in the original
    units of the subspace's features; ``model_distance`` is what the model ranked by (scaled units in
    product mode, equal to ``distance`` in faithful mode)."""

    row_id: Any
    label: Any
    values: tuple[float, ...]
    distance: float
    model_distance: float


@dataclass(frozen=True)
class SubspaceVote:
    """What one voting subspace saw and how much it moved the decision."""

    features: tuple[str, ...]
    score: float
    weight: float
    values: tuple[float, ...]
    neighbours: tuple[Neighbour, ...]
    fractions: dict[Any, float]
    vote: Any
    contribution: dict[Any, float]
    summary: str


@dataclass(frozen=True)
class Explanation:
    """Prediction, class probabilities, per-subspace votes (best first) and a one-line summary."""

    prediction: Any
    proba: dict[Any, float]
    subspaces: tuple[SubspaceVote, ...]
    summary: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; dict keys (class labels) become strings."""
        data = asdict(self)
        data["proba"] = {str(k): v for k, v in self.proba.items()}
        for space in data["subspaces"]:
            space["fractions"] = {str(k): v for k, v in space["fractions"].items()}
            space["contribution"] = {str(k): v for k, v in space["contribution"].items()}
        return data

    def __str__(self) -> str:
        return self.summary


def _label(value: Any, label_names: dict | None) -> str:
    return str(label_names.get(plain(value), value)) if label_names else str(value)


def _space_vote(
    clf, index: int, row: np.ndarray, share: np.ndarray, sentence: str, label_names: dict | None
) -> SubspaceVote:
    space = clf.subspaces_[index]
    features = list(space.features)
    idx, model_dist = clf._space_neighbours(index, row[None, features])
    idx, model_dist = idx[0], model_dist[0]
    raw = clf.X_train_[np.ix_(idx, features)]
    distances = np.sqrt(((raw - row[features]) ** 2).sum(axis=1))
    neighbour_labels = clf.y_train_[idx]
    counts = np.bincount(neighbour_labels, minlength=len(clf.classes_))
    vote = int(np.argmax(counts))
    names = [clf.feature_names_[f] for f in features]
    text = sentence.format(
        space=" × ".join(names),
        count=int(counts[vote]),
        k=len(idx),
        label=_label(clf.classes_[vote], label_names),
    )
    return SubspaceVote(
        features=tuple(names),
        score=float(space.score),
        weight=float(clf.weights_[index]),
        values=tuple(float(v) for v in row[features]),
        neighbours=tuple(
            Neighbour(
                plain(clf.sample_ids_[i]),
                plain(clf.classes_[neighbour_labels[j]]),
                tuple(float(v) for v in raw[j]),
                float(distances[j]),
                float(model_dist[j]),
            )
            for j, i in enumerate(idx)
        ),
        fractions={plain(c): float(n / len(idx)) for c, n in zip(clf.classes_, counts)},
        vote=plain(clf.classes_[vote]),
        contribution={plain(c): float(v) for c, v in zip(clf.classes_, share)},
        summary=text,
    )


def explain_row(clf, x, *, sentence: str = DEFAULT_SENTENCE, label_names: dict | None = None) -> Explanation:
    """Explain ``clf``'s prediction for one row ``x`` (1-D array-like or a one-row 2-D input).

    ``sentence`` is a format string with ``{space}``, ``{count}``, ``{k}`` and ``{label}``;
    ``label_names`` maps class labels to words ("liked").
    """
    check_is_fitted(clf)
    X = np.asarray(x, dtype=float).reshape(1, -1) if not hasattr(x, "iloc") else x
    X = validate_data(clf, X, reset=False, dtype=np.float64)
    if X.shape[0] != 1:
        raise ValueError(f"explain() takes one row, got {X.shape[0]}")
    proba = clf._proba(X)[0]
    prediction = plain(clf.classes_[int(np.argmax(proba))])
    votes: list[SubspaceVote] = []
    if clf.subspaces_:
        fractions = clf._class_fractions(X)[:, 0, :]
        scores = np.array([s.score for s in clf.subspaces_])
        parts = combine.contributions(
            fractions,
            scores,
            clf.weights_,
            faithful=clf.mode_ == "faithful",
            method=clf.method,
            weight_by_score=bool(clf.weight_by_score),
        )
        total = parts.sum()
        parts = parts / total if total > 0 else np.full_like(parts, 1.0 / parts.size)
        votes = [
            _space_vote(clf, i, X[0], parts[i], sentence, label_names) for i in range(len(clf.subspaces_))
        ]
    verdict = f"predicted {_label(prediction, label_names)} (probability {proba.max():.2f})"
    if votes:
        strongest = max(votes, key=lambda v: v.contribution[prediction])
        summary = f"{verdict}: {strongest.summary}"
    else:
        summary = f"{verdict} from the class frequencies alone (no subspace could be scored)"
    return Explanation(
        prediction, {plain(c): float(p) for c, p in zip(clf.classes_, proba)}, tuple(votes), summary
    )
