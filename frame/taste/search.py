"""Finding and scoring the candidate subspaces (feature pairs) during ``fit``.

Two procedures live here, side by side so their differences are easy to see:

* ``faithful_*`` — the original ikNN: 1-D screening and pair scoring by ``cross_validate`` of a
  scikit-learn ``KNeighborsClassifier`` with 5 stratified folds (no shuffle), macro-F1.
* ``loo_*`` — frame's product search: exact leave-one-out kNN on standardised columns (no fold
  noise, works down to a handful of rows), macro-F1, and a diversity-aware choice of voters.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from frame.taste.neighbours import class_fractions, kneighbors, macro_f1, query_blocks, squared_distances

# Leave-one-out scores are computed on at most this many rows (a fixed stratified subset) so fit
# time stays linear in n for big tables; neighbours are still searched among all rows.
_MAX_SCORING_ROWS = 1000
# Above this many query × training distances the original's neighbours come from its KD-tree.
_BRUTE_FORCE_ENTRIES = 4_000_000


@dataclass(frozen=True)
class Subspace:
    """One voter: the column indices it looks at and its cross-validated macro-F1."""

    features: tuple[int, ...]
    score: float


def n_screened_features(max_spaces_tested: int, screening: str) -> int:
    """How many single features survive screening: ceil(sqrt(2M)) now, ceil(sqrt(M)) in the 2021
    version the published benchmark used."""
    factor = 2 if screening == "current" else 1
    return math.ceil(math.sqrt(factor * max_spaces_tested))


def rank_features(scores: np.ndarray, keep: int) -> list[int]:
    """Indices of the ``keep`` best features, best first, ties → lower index; returned sorted."""
    order = np.argsort(-scores, kind="stable")[:keep]
    return sorted(int(i) for i in order)


def candidate_subspaces(
    d: int, max_spaces_tested: int, screen: Callable[[], list[int]]
) -> list[tuple[int, ...]]:
    """All unordered pairs, or (when there are more than ``max_spaces_tested``) the pairs among the
    features ``screen()`` keeps. One feature gives the single 1-D subspace (the original crashes)."""
    if d == 1:
        return [(0,)]
    n_pairs = d * (d - 1) // 2
    features = list(range(d))
    if max_spaces_tested != -1 and n_pairs > max_spaces_tested:
        features = screen()
    return list(itertools.combinations(features, 2))


# --- faithful -----------------------------------------------------------------------------------


def sklearn_neighbours(train: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """Exactly the neighbours ``KNeighborsClassifier(k).fit(train).kneighbors(query)`` returns.

    Its "auto" rule picks a KD-tree (leaf size 30) for few columns and k < n/2; asking that tree
    directly skips the estimator's per-call validation, which made fitting the original's search
    ~10× slower on a few hundred rows. Other cases go through the estimator itself, so the
    original's neighbour order on exact distance ties is kept either way.
    """
    from sklearn.neighbors import KDTree, KNeighborsClassifier

    if train.shape[1] <= 15 and k < train.shape[0] // 2:
        return KDTree(train, leaf_size=30).query(query, k, return_distance=False)
    dummy = np.zeros(train.shape[0], dtype=int)
    return KNeighborsClassifier(n_neighbors=k).fit(train, dummy).kneighbors(query, return_distance=False)


def faithful_neighbour_sets(train: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """The k neighbours ``sklearn_neighbours`` finds, as a set per row (order may differ).

    The original's predictions only count classes among the k neighbours, so the order inside the
    set is irrelevant; the set itself is unique unless the k-th and (k+1)-th distances (nearly) tie.
    Brute force finds it without scikit-learn's per-call cost (validation, tree building, and on
    small folds a threaded distance reduction that cost ~0.1 s a call on a busy 2-core machine);
    rows whose boundary is within rounding of a tie go to ``sklearn_neighbours``, so its tie order
    still decides and the result is always exactly the original's. The tree computes exact squared
    distances as brute force does; scikit-learn's brute path expands |q|² − 2q·t + |t|², whose
    rounding error is far below the wider tolerance used for it.
    """
    n_train = train.shape[0]
    if k >= n_train:
        return np.tile(np.arange(n_train), (query.shape[0], 1))
    if query.shape[0] * n_train > _BRUTE_FORCE_ENTRIES:
        return sklearn_neighbours(train, query, k)
    found = np.empty((query.shape[0], k), dtype=np.intp)
    tied_per_block = []
    blocks = query_blocks(query.shape[0], n_train)  # bounded scratch (see neighbours.BLOCK_ENTRIES)
    for start in blocks:
        rows = query[start : start + blocks.step]
        nearest, boundary_tie = _nearest_with_ties(train, rows, k)
        found[start : start + len(rows)] = nearest
        tied_per_block.append(start + np.flatnonzero(boundary_tie))
    tied = np.concatenate(tied_per_block)
    if tied.size:
        found[tied] = sklearn_neighbours(train, query[tied], k)
    return found


def _nearest_with_ties(train: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest training rows of each query row by brute force, and whether the k-th and
    (k+1)-th distances are within rounding of a tie (then scikit-learn's tie order decides)."""
    dist = squared_distances(train, query)
    nearest = np.argpartition(dist, k, axis=1)[:, : k + 1]
    near = np.take_along_axis(dist, nearest, axis=1)
    order = np.argsort(near, axis=1, kind="stable")
    nearest, near = np.take_along_axis(nearest, order, axis=1), np.take_along_axis(near, order, axis=1)
    if train.shape[1] <= 15 and k < train.shape[0] // 2:  # the KD-tree path: exact distances
        tolerance = 1e-9 * (1.0 + near[:, k])
    else:  # the expanded-distance path
        tolerance = 1e-9 * (1.0 + (query**2).sum(axis=1) + (train**2).sum(axis=1).max())
    return nearest[:, :k], near[:, k] - near[:, k - 1] <= tolerance


def faithful_folds(y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The original's folds: StratifiedKFold(5) without shuffle (fewer folds when a class has < 5
    rows). They depend only on ``y``, so one search computes them once for every subspace."""
    from sklearn.model_selection import StratifiedKFold

    n_splits = max(2, min(5, int(np.bincount(y).min())))
    return list(StratifiedKFold(n_splits).split(np.zeros((len(y), 1)), y))


def selection_splits(y: np.ndarray, repeats: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The inner splits on which the product default compares the two searches: ``repeats`` ×
    StratifiedKFold(5) (fewer folds when a class has < 5 rows), the first without shuffle as the
    original's own folds, the others shuffled with seeds 1, 2, ... Deterministic, so a fit gives
    the same model for the same ratings."""
    from sklearn.model_selection import StratifiedKFold

    n_splits = max(2, min(5, int(np.bincount(y).min())))
    rows = np.zeros((len(y), 1))
    splits = list(StratifiedKFold(n_splits).split(rows, y))
    for seed in range(1, repeats):
        splits += StratifiedKFold(n_splits, shuffle=True, random_state=seed).split(rows, y)
    return splits


def _faithful_cv(X: np.ndarray, y: np.ndarray, k: int, folds=None) -> float:
    """Mean test macro-F1 of ``cross_validate(KNN(k), X, y, cv=5, scoring="f1_macro")``.

    Spelled out (StratifiedKFold(5) without shuffle, fit, predict, macro-F1 over the labels present)
    because ``cross_validate``'s per-call overhead dominated fit time; the numbers are identical
    (pinned by tests/taste/test_faithful.py). With < 5 rows in a class, folds and k shrink so tiny
    data still fits — the original raised there.
    """
    n_classes = int(y.max()) + 1
    scores = []
    for train, test in faithful_folds(y) if folds is None else folds:
        # = KNeighborsClassifier(k).fit(...).predict(...) (uniform weights: majority of the
        # neighbours, ties → lowest class) without scipy's slow mode()
        neighbours = faithful_neighbour_sets(X[train], X[test], max(1, min(k, len(train))))
        predicted = np.argmax(class_fractions(y[train][neighbours], n_classes), axis=1)
        scores.append(macro_f1(y[test], predicted, n_classes))
    return float(np.mean(scores))


def faithful_search(
    X: np.ndarray, y: np.ndarray, k: int, max_spaces_tested: int, screening: str
) -> list[Subspace]:
    """Score every candidate subspace the original way; ranked best first (stable for ties)."""
    d = X.shape[1]
    folds = faithful_folds(y)

    def screen() -> list[int]:
        singles = np.array([_faithful_cv(X[:, [i]], y, k, folds) for i in range(d)])
        return rank_features(singles, n_screened_features(max_spaces_tested, screening))

    spaces = [
        Subspace(f, _faithful_cv(X[:, list(f)], y, k, folds))
        for f in candidate_subspaces(d, max_spaces_tested, screen)
    ]
    return sorted(spaces, key=lambda s: -s.score)


# --- product --------------------------------------------------------------------------------------


def scoring_rows(y: np.ndarray) -> np.ndarray:
    """All rows, or an evenly spaced per-class subset of ``_MAX_SCORING_ROWS`` rows (deterministic)."""
    n = len(y)
    if n <= _MAX_SCORING_ROWS:
        return np.arange(n)
    keep = []
    for cls in np.unique(y):
        members = np.flatnonzero(y == cls)
        share = max(1, round(_MAX_SCORING_ROWS * len(members) / n))
        keep.append(members[np.linspace(0, len(members) - 1, share).round().astype(int)])
    return np.unique(np.concatenate(keep))


def loo_score(Xs: np.ndarray, y: np.ndarray, features: tuple[int, ...], k: int, rows: np.ndarray) -> float:
    """Leave-one-out macro-F1 of a k-NN restricted to ``features`` (k ≤ n − 1)."""
    sub = Xs[:, list(features)]
    if len(rows) == len(y):
        idx, _ = kneighbors(sub, sub, k, leave_one_out=True)
    else:
        idx, _ = kneighbors(sub, sub[rows], k + 1)
        own = idx == rows[:, None]
        # Drop the row itself if present, else the farthest extra neighbour.
        drop = np.where(own.any(axis=1), own.argmax(axis=1), k)
        keep = np.ones_like(idx, dtype=bool)
        keep[np.arange(len(rows)), drop] = False
        idx = idx[keep].reshape(len(rows), k)
    n_classes = int(y.max()) + 1
    predicted = np.argmax(class_fractions(y[idx], n_classes), axis=1)
    return macro_f1(y[rows], predicted, n_classes)


def loo_search(Xs: np.ndarray, y: np.ndarray, k: int, max_spaces_tested: int) -> list[Subspace]:
    """Score candidate subspaces by leave-one-out on standardised data; ranked best first."""
    d = Xs.shape[1]
    rows = scoring_rows(y)

    def screen() -> list[int]:
        singles = np.array([loo_score(Xs, y, (i,), k, rows) for i in range(d)])
        return rank_features(singles, n_screened_features(max_spaces_tested, "current"))

    spaces = [
        Subspace(f, loo_score(Xs, y, f, k, rows)) for f in candidate_subspaces(d, max_spaces_tested, screen)
    ]
    return sorted(spaces, key=lambda s: -s.score)


def choose_diverse(ranked: list[Subspace], count: int, diversity: float) -> list[Subspace]:
    """Greedy pick of ``count`` voters: each step takes the subspace with the best score minus
    ``diversity`` × (how often its features were already picked). Diversity 0 = plain top-N."""
    chosen: list[Subspace] = []
    uses: dict[int, int] = {}
    pool = list(ranked)
    while pool and len(chosen) < count:
        adjusted = [s.score - diversity * sum(uses.get(f, 0) for f in s.features) for s in pool]
        best = int(np.argmax(adjusted))  # first maximum → better-ranked subspace wins ties
        pick = pool.pop(best)
        chosen.append(pick)
        for f in pick.features:
            uses[f] = uses.get(f, 0) + 1
    return chosen
