"""faithful=True reproduces the original ikNN's rules and its published numbers (docs/iknn.md)."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.neighbors import KNeighborsClassifier

from frame.taste import IKNNClassifier
from frame.taste.combine import faithful_scores, to_proba
from frame.taste.neighbours import macro_f1
from frame.taste.search import _faithful_cv, faithful_neighbour_sets, n_screened_features, sklearn_neighbours

MODES = [("use proba", True), ("use proba", False), ("simple majority", True), ("simple majority", False)]


def test_product_rule_test_vector_gives_class_zero():
    fractions = np.array([[[0.5, 0.1, 0.4]], [[0.1, 0.5, 0.4]]])
    scores = faithful_scores(fractions, np.array([0.8, 0.8]), "use proba", True)
    np.testing.assert_allclose(scores, [[0.48, 0.48, 0.0]])
    assert to_proba(scores).argmax() == 0
    averaged = np.tensordot(np.array([0.8, 0.8]), fractions, axes=(0, 0))
    assert averaged.argmax() == 2  # what a weighted average would have said


def test_unweighted_majority_ties_go_to_the_best_ranked_subspace():
    # votes: rank0 → 2, rank1 → 1, rank2 → 1, rank3 → 2: tie 2:2, best-ranked subspace voted 2.
    fractions = np.array([[[0, 0.2, 0.8]], [[0, 0.9, 0.1]], [[0, 0.6, 0.4]], [[0.1, 0.2, 0.7]]])
    scores = faithful_scores(fractions, np.array([0.9, 0.8, 0.7, 0.6]), "simple majority", False)
    assert scores.argmax() == 2
    weighted = faithful_scores(fractions, np.array([0.9, 0.8, 0.7, 0.6]), "simple majority", True)
    assert weighted.argmax() == 1  # 0.8 + 0.7 > 0.9 + 0.6


def test_hand_written_cv_equals_cross_validate():
    X, y = load_wine(return_X_y=True)
    for features in ([0, 6], [9], [12, 4]):
        expected = cross_validate(
            KNeighborsClassifier(n_neighbors=8), X[:, features], y, cv=5, scoring="f1_macro"
        )["test_score"].mean()
        assert _faithful_cv(X[:, features], y, 8) == pytest.approx(expected, abs=1e-12)


def test_macro_f1_matches_sklearn():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    for _ in range(20):
        t, p = rng.integers(0, 4, 15), rng.integers(0, 4, 15)
        assert macro_f1(t, p, 4) == pytest.approx(f1_score(t, p, average="macro", zero_division=0))


def test_screening_sizes():
    assert n_screened_features(50, "current") == 10
    assert n_screened_features(50, "2021") == 8
    X, y = load_wine(return_X_y=True)
    clf = IKNNClassifier(faithful=True).fit(X, y)
    assert len(clf.ranking_) == 45  # 13 features → 78 pairs > 50 → best 10 features → 45 pairs
    assert [s.features for s in clf.subspaces_[:2]] == [(0, 6), (6, 9)]  # docs: flavanoids×alcohol, ×color
    assert [round(s.score, 4) for s in clf.subspaces_[:2]] == [0.9157, 0.9039]


def _cv_per_mode(X, y):
    """Fit once per outer fold; method and weight_by_score only act at prediction in faithful mode."""
    results = {mode: [] for mode in MODES}
    for train, test in StratifiedKFold(5).split(X, y):
        fitted = IKNNClassifier(faithful=True).fit(X[train], y[train])
        for method, weighted in MODES:
            fitted.set_params(method=method, weight_by_score=weighted)
            results[(method, weighted)].append(macro_f1(y[test], fitted.predict(X[test]), 3))
    return {mode: float(np.mean(v)) for mode, v in results.items()}


def test_published_iris():
    X, y = load_iris(return_X_y=True)
    scores = cross_validate(IKNNClassifier(faithful=True), X, y, cv=StratifiedKFold(5), scoring="f1_macro")
    assert scores["test_score"].mean() == pytest.approx(0.960, abs=0.005)


def test_breast_cancer_first_fold():
    """No diversity control in the original: fold 1's voters are all tumour-size pairs."""
    X, y = load_breast_cancer(return_X_y=True)
    train, test = next(StratifiedKFold(5).split(X, y))
    clf = IKNNClassifier(faithful=True).fit(X[train], y[train])
    assert [s.features for s in clf.subspaces_] == [(3, 23), (0, 20), (2, 22), (0, 22), (13, 22)]
    assert macro_f1(y[test], clf.predict(X[test]), 2) == pytest.approx(0.8618421, abs=1e-6)


@pytest.mark.parametrize(("load", "published"), [
    (load_wine, (0.9354, 0.9517, 0.9178, 0.9178)),
    (load_breast_cancer, (0.9122, 0.9290, 0.9104, 0.9104)),
], ids=["wine", "breast_cancer"])
def test_published_per_mode(load, published):
    X, y = load(return_X_y=True)
    got = _cv_per_mode(X, y)
    for mode, value in zip(MODES, published, strict=True):
        assert got[mode] == pytest.approx(value, abs=5e-4), mode


@pytest.mark.parametrize("n_train", [12, 40, 120])
def test_fast_neighbour_search_equals_kneighbors_classifier_with_ties(n_train):
    rng = np.random.default_rng(n_train)
    train = rng.integers(0, 4, size=(n_train, 2)).astype(float)  # many exact distance ties
    query = rng.integers(0, 4, size=(30, 2)).astype(float)
    for k in (1, 5, 8):
        model = KNeighborsClassifier(n_neighbors=k).fit(train, np.zeros(n_train, dtype=int))
        expected = model.kneighbors(query, return_distance=False)
        np.testing.assert_array_equal(sklearn_neighbours(train, query, k), expected)


@pytest.mark.parametrize("integers", [True, False])
def test_brute_force_neighbour_sets_equal_the_original_ones(integers):
    """The original's search counts classes among the k neighbours, so only the set matters; brute
    force must give scikit-learn's set, including which of several tied rows at the k-th distance."""
    rng = np.random.default_rng(int(integers))
    for trial in range(60):
        n_train, d = int(rng.integers(5, 200)), int(rng.integers(1, 3))
        shape = (n_train + 25, d)
        data = rng.integers(0, 4, shape).astype(float) if integers else rng.normal(size=shape) * 10.0 ** (trial % 5 - 2)
        train, query = data[:n_train], data[n_train:]
        k = int(rng.integers(1, min(12, n_train)))
        model = KNeighborsClassifier(n_neighbors=k).fit(train, np.zeros(n_train, dtype=int))
        expected = np.sort(model.kneighbors(query, return_distance=False), axis=1)
        np.testing.assert_array_equal(np.sort(faithful_neighbour_sets(train, query, k), axis=1), expected)
