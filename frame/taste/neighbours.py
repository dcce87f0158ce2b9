"""Exact, deterministic k-nearest-neighbour search inside one low-dimensional subspace.

The product model needs two things scikit-learn's ``KNeighborsClassifier`` does not promise: a fixed
tie-breaking rule (equal distances → lower training row first, so results never depend on tree
layout) and cheap leave-one-out scoring (exclude each row from its own neighbourhood). Subspaces have
one or two columns, so brute force on chunks of queries is both exact and fast.
"""

from __future__ import annotations

import numpy as np

# Cap on query-rows × train-rows per distance block: 2^16 float64 entries = 512 KiB. A search holds
# about four block-sized arrays at once (distances, one column's differences, the partition's copy,
# the selection mask), so its scratch stays near 2 MiB whatever the sizes, beside its results. It was
# 4 M entries (32 MB): the explanation plot's 120 × 120 grid against 300 rated pictures peaked at
# 92 MiB in tracemalloc (the taste child's own peak grew with the ratings: benchmarks/
# taste_child_imports.py --ratings). Smaller blocks cost no measurable CPU here (0.31 s for the grid
# against 1000 rows, 0.33 s with 4 M entries); 2^18 kept 1.5 MiB more at 12 ratings.
BLOCK_ENTRIES = 1 << 16


def query_blocks(n_query: int, n_train: int) -> range:
    """Start rows of the query blocks that keep each distance block within ``BLOCK_ENTRIES``."""
    return range(0, n_query, max(1, BLOCK_ENTRIES // max(n_train, 1)))


def squared_distances(train: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances by direct differences, so identical points give exactly 0.

    The sum runs column by column in one scratch array (the same operations in the same order as
    ``dist += (q - t) ** 2``, so the values are bit-identical) instead of two temporaries a column."""
    dist = np.zeros((query.shape[0], train.shape[0]))
    diff = np.empty_like(dist)
    for col in range(train.shape[1]):
        np.subtract(query[:, col, None], train[None, :, col], out=diff)
        np.multiply(diff, diff, out=diff)
        dist += diff
    return dist


def _select_k(dist: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k smallest entries per row, ordered by (distance, index).

    ``np.partition`` finds the k-th distance; rows strictly closer are all taken and ties at the
    boundary are filled in index order, so the selection is the same as a stable full sort at a
    fraction of its cost.
    """
    n_query = dist.shape[0]
    kth = np.partition(dist, k - 1, axis=1)[:, k - 1 : k]
    take = dist <= kth
    crowded = np.flatnonzero(take.sum(axis=1) > k)
    if crowded.size:  # more rows tie at the k-th distance than fit: lower indices first
        sub, sub_kth = dist[crowded], kth[crowded]
        tied = sub == sub_kth
        need = k - (sub < sub_kth).sum(axis=1, keepdims=True)
        take[crowded] = (sub < sub_kth) | (tied & (np.cumsum(tied, axis=1) <= need))
    idx = np.nonzero(take)[1].reshape(n_query, k)
    chosen = np.take_along_axis(dist, idx, axis=1)
    order = np.argsort(chosen, axis=1, kind="stable")
    return np.take_along_axis(idx, order, axis=1)


def kneighbors(
    train: np.ndarray, query: np.ndarray, k: int, *, leave_one_out: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(indices, distances)`` of the k nearest training rows for every query row.

    With ``leave_one_out`` the query rows *are* the training rows (same order) and each row is kept
    out of its own neighbourhood; other rows at distance 0 (duplicates) still count.
    """
    n_train = train.shape[0]
    limit = n_train - 1 if leave_one_out else n_train
    if not 1 <= k <= limit:
        raise ValueError(f"k={k} neighbours requested but only {limit} training rows are available")
    blocks = query_blocks(query.shape[0], n_train)
    all_idx, all_dist = [], []
    for start in blocks:
        block = squared_distances(train, query[start : start + blocks.step])
        if leave_one_out:
            rows = np.arange(block.shape[0])
            block[rows, rows + start] = np.inf
        idx = _select_k(block, k)
        all_idx.append(idx)
        all_dist.append(np.sqrt(np.take_along_axis(block, idx, axis=1)))
    return np.vstack(all_idx), np.vstack(all_dist)


def class_fractions(neighbour_labels: np.ndarray, n_classes: int) -> np.ndarray:
    """Fraction of each class among every row's neighbours: shape (n_query, n_classes)."""
    counts = np.zeros((neighbour_labels.shape[0], n_classes))
    for cls in range(n_classes):
        counts[:, cls] = (neighbour_labels == cls).sum(axis=1)
    return counts / neighbour_labels.shape[1]


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> float:
    """Macro-averaged F1 over the classes present in ``y_true`` or ``y_pred`` (scikit-learn's rule,
    zero for a class that is never predicted correctly), computed without the overhead of
    ``sklearn.metrics`` because it runs once per candidate subspace."""
    scores = []
    for cls in range(n_classes):
        true_c = y_true == cls
        pred_c = y_pred == cls
        if not true_c.any() and not pred_c.any():
            continue
        tp = float(np.sum(true_c & pred_c))
        scores.append(2.0 * tp / (true_c.sum() + pred_c.sum()))
    return float(np.mean(scores)) if scores else 0.0
