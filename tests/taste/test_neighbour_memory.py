"""The neighbour searches' scratch memory stays small however many pictures are rated (it is the taste
child's peak: the explanation plot asks about a 120 × 120 grid), and the blocks change no result."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from frame.taste import search
from frame.taste.neighbours import kneighbors, query_blocks, squared_distances

GRID = np.column_stack([axis.ravel() for axis in np.meshgrid(np.linspace(-3, 3, 120), np.linspace(-3, 3, 120))])
SCRATCH_LIMIT = 8 * 2**20  # bytes: 3.9 MiB now (results 1.8 MiB, twice while stacked); 4 M-entry blocks: 50-123 MiB


def _traced_peak(run: Callable[[], object]) -> int:
    """tracemalloc's peak (numpy reports its arrays to it) while ``run`` runs, in bytes."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("n_train", [150, 1000])
def test_kneighbors_scratch_stays_small_against_many_rated_pictures(n_train):
    train = np.random.default_rng(n_train).normal(size=(n_train, 2))
    peak = _traced_peak(lambda: kneighbors(train, GRID, 8))
    assert peak < SCRATCH_LIMIT, f"{peak / 2**20:.1f} MiB"


def test_faithful_brute_force_scratch_stays_small(monkeypatch):
    """14,400 × 250 distances are under the brute-force limit: searched in blocks, not in one piece."""
    train = np.random.default_rng(250).normal(size=(250, 2))
    assert GRID.shape[0] * len(train) <= search._BRUTE_FORCE_ENTRIES  # noqa: SLF001 - the path under test

    def no_sklearn(*args):
        raise AssertionError("random data has no distance ties: brute force alone must answer")

    monkeypatch.setattr(search, "sklearn_neighbours", no_sklearn)
    peak = _traced_peak(lambda: search.faithful_neighbour_sets(train, GRID, 8))
    assert peak < SCRATCH_LIMIT, f"{peak / 2**20:.1f} MiB"


def _data(integers: bool, n_train: int, n_query: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (n_train + n_query, 2)
    data = rng.integers(0, 6, shape).astype(float) if integers else rng.normal(size=shape)
    return data[:n_train], data[n_train:]


@pytest.mark.parametrize("integers", [True, False])
def test_blocked_faithful_sets_equal_scikit_learns_across_blocks(integers):
    """Queries over several blocks, with exact ties at the k-th distance in every block (integers):
    each tied row goes to scikit-learn at its own position, so the sets are still the original's."""
    train, query = _data(integers, 300, 3000, 7)
    assert len(query_blocks(len(query), len(train))) >= 3
    for k in (1, 8):
        model = KNeighborsClassifier(n_neighbors=k).fit(train, np.zeros(len(train), dtype=int))
        expected = np.sort(model.kneighbors(query, return_distance=False), axis=1)
        np.testing.assert_array_equal(np.sort(search.faithful_neighbour_sets(train, query, k), axis=1), expected)


@pytest.mark.parametrize("integers", [True, False])
def test_blocked_kneighbors_equal_a_full_stable_sort(integers):
    """Frame's rule (distance, then lower training row) on one full distance matrix, blocks or not."""
    train, query = _data(integers, 1000, 1500, 8)
    assert len(query_blocks(len(query), len(train))) >= 3
    for queries, leave_one_out in ((query, False), (train, True)):
        full = squared_distances(train, queries)
        if leave_one_out:
            np.fill_diagonal(full, np.inf)
        expected = np.argsort(full, axis=1, kind="stable")[:, :8]
        idx, dist = kneighbors(train, queries, 8, leave_one_out=leave_one_out)
        np.testing.assert_array_equal(idx, expected)
        np.testing.assert_array_equal(dist, np.sqrt(np.take_along_axis(full, expected, axis=1)))
