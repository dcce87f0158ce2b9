"""How the votes of the chosen subspaces become one class distribution.

Every rule returns non-negative class scores whose row-wise argmax (ties → lowest class index, as
``np.argmax`` does) *is* the prediction, so ``predict_proba`` = scores / row sum is always consistent
with ``predict``. Notation follows ``docs/iknn.md``: ``fractions[s, q, c]`` = share of class c among
the k neighbours of query q in subspace s, ``scores[s]`` = the subspace's cross-validated score.
"""

from __future__ import annotations

import numpy as np

# Bonus that turns "mode, ties → best-ranked subspace" into a plain argmax: subspace r (0 = best) adds
# _TIE_EPS·2**-r to its class. The bonuses of all lower-ranked subspaces sum to less than the best
# one's, and the total stays far below one whole vote, so counts are never overturned.
_TIE_EPS = 1e-6


def hard_votes(fractions: np.ndarray) -> np.ndarray:
    """Each subspace's own label per query (argmax of its neighbour fractions, ties → lowest index)."""
    return np.argmax(fractions, axis=2)


def _one_hot(labels: np.ndarray, n_classes: int) -> np.ndarray:
    return (labels[..., None] == np.arange(n_classes)).astype(float)


def faithful_scores(
    fractions: np.ndarray, scores: np.ndarray, method: str, weight_by_score: bool
) -> np.ndarray:
    """The original's four decision rules (see docs/iknn.md, "Combination rules").

    ``use proba`` + weighted is the product of two sums, P(c)·V(c): a class that is no subspace's top
    vote scores zero even if every neighbourhood contains it.
    """
    n_classes = fractions.shape[2]
    votes = _one_hot(hard_votes(fractions), n_classes)  # (s, q, c)
    weights = scores[:, None, None]
    if method == "simple majority" and not weight_by_score:
        bonus = _TIE_EPS * 2.0 ** -np.arange(len(scores))
        return votes.sum(axis=0) + (votes * bonus[:, None, None]).sum(axis=0)
    if method == "simple majority":
        return (votes * weights).sum(axis=0)
    summed = fractions.sum(axis=0)
    if not weight_by_score:
        return summed
    return summed * (votes * weights).sum(axis=0)


def product_scores(fractions: np.ndarray, weights: np.ndarray, method: str) -> np.ndarray:
    """Frame's rules: a weighted average of neighbour fractions (``use proba``) or of hard votes
    (``simple majority``). Averages keep every subspace's evidence, unlike the product rule."""
    if method == "simple majority":
        fractions = _one_hot(hard_votes(fractions), fractions.shape[2])
    return np.tensordot(weights, fractions, axes=(0, 0))


def to_proba(class_scores: np.ndarray) -> np.ndarray:
    """Normalise rows to sum to 1; an all-zero row (every weight zero) becomes uniform, whose argmax
    is class 0 — the same answer the original's argmax over zeros gives."""
    totals = class_scores.sum(axis=1, keepdims=True)
    n_classes = class_scores.shape[1]
    safe = np.where(totals > 0, totals, 1.0)
    proba = np.where(totals > 0, class_scores / safe, 1.0 / n_classes)
    return proba


def contributions(
    fractions: np.ndarray,
    scores: np.ndarray,
    weights: np.ndarray,
    *,
    faithful: bool,
    method: str,
    weight_by_score: bool,
) -> np.ndarray:
    """Split one query's class scores into per-subspace parts: shape (n_spaces, n_classes), summing
    over subspaces to the class scores the decision rule produced.

    ``fractions`` has shape (n_spaces, n_classes). Additive rules split trivially. The product rule
    P(c)·V(c) = Σ_s Σ_t p_s(c)·v_t(c) is split by giving each cross term half to s and half to t, so
    subspace s gets (p_s(c)·V(c) + P(c)·v_s(c)) / 2.
    """
    frac = fractions[:, None, :]  # (s, 1 query, c) for the shared rules
    if not faithful:
        share = fractions if method == "use proba" else _one_hot(hard_votes(frac), fractions.shape[1])[:, 0]
        return weights[:, None] * share
    votes = _one_hot(hard_votes(frac), fractions.shape[1])[:, 0]
    if method == "simple majority" and not weight_by_score:
        bonus = _TIE_EPS * 2.0 ** -np.arange(len(scores))
        return votes * (1.0 + bonus[:, None])
    weighted_votes = votes * scores[:, None]
    if method == "simple majority":
        return weighted_votes
    if not weight_by_score:
        return fractions.copy()
    return (fractions * weighted_votes.sum(axis=0) + fractions.sum(axis=0) * weighted_votes) / 2.0
