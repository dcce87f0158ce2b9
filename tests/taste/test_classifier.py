"""Behaviour of IKNNClassifier beyond scikit-learn's generic checks."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.datasets import load_iris, load_wine

from frame.taste import IKNNClassifier

MODES = [
    dict(method=m, weight_by_score=w, faithful=f)
    for f in (False, True)
    for m in ("use proba", "simple majority")
    for w in (True, False)
]


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


def test_is_classifier_and_clone_round_trips_every_parameter():
    params = dict(
        n_neighbors=3,
        method="simple majority",
        weight_by_score=False,
        max_spaces_tested=7,
        num_best_spaces=2,
        faithful=True,
        screening="2021",
        scaling="none",
        diversity=0.3,
        select_by_cv=False,
        selection_repeats=3,
    )
    clf = IKNNClassifier(**params)
    assert is_classifier(clf)
    assert clone(clf).get_params() == params
    assert set(IKNNClassifier().get_params()) == set(params)


def test_constructor_is_keyword_only():
    with pytest.raises(TypeError):
        IKNNClassifier(8)


@pytest.mark.parametrize(
    "params", MODES, ids=lambda p: f"{p['faithful']}-{p['method']}-{p['weight_by_score']}"
)
def test_proba_rows_sum_to_one_and_argmax_is_predict(wine, params):
    X, y = wine[0][:, :7], wine[1]  # 21 pairs: no screening, keeps the faithful fits quick
    clf = IKNNClassifier(**params).fit(X[::2], y[::2])
    proba = clf.predict_proba(X[1::2])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (proba >= 0).all()
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X[1::2]))


def test_predict_returns_ndarray_and_does_not_mutate(wine):
    X, y = wine
    clf = IKNNClassifier().fit(X, y)
    before = pickle.dumps(clf)
    pred = clf.predict(X)
    clf.predict_proba(X)
    clf.explain(X[0])
    assert isinstance(pred, np.ndarray)
    assert pickle.dumps(clf) == before


def test_deterministic_including_row_ties():
    # Many duplicated rows → many distance ties; two fits must agree exactly.
    X, y = load_iris(return_X_y=True)
    X = np.round(X)
    a = IKNNClassifier().fit(X, y)
    b = IKNNClassifier().fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert [s.features for s in a.subspaces_] == [s.features for s in b.subspaces_]


def test_distance_ties_prefer_lower_training_rows():
    from frame.taste.neighbours import kneighbors

    train = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    idx, dist = kneighbors(train, np.zeros((1, 2)), 2)
    assert idx.tolist() == [[0, 1]]
    np.testing.assert_allclose(dist, 1.0)
    idx, _ = kneighbors(train, train, 1, leave_one_out=True)
    assert idx[:, 0].tolist() == [1, 0, 1, 0]


@pytest.mark.parametrize("n_rows", [6, 11, 30])
def test_tiny_imbalanced_data_with_string_labels(n_rows):
    rng = np.random.default_rng(n_rows)
    X = rng.normal(size=(n_rows, 4)) * [1, 100, 0.01, 5]
    y = np.array(["like"] * (n_rows - 3) + ["dislike"] * 2 + ["meh"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model itself must not warn on tiny classes
        clf = IKNNClassifier().fit(X, y)
        proba = clf.predict_proba(X)
    assert set(clf.predict(X)) <= {"like", "dislike", "meh"}
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.n_neighbors_ <= n_rows - 1


def test_tiny_data_in_faithful_mode_shrinks_folds_instead_of_crashing():
    X = np.arange(16, dtype=float).reshape(8, 2)
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    clf = IKNNClassifier(faithful=True, n_neighbors=3).fit(X, y)  # class 1 has 3 < 5 rows
    assert clf.predict([[14.0, 15.0]]).tolist() == [1]


def test_separable_tiny_data_is_learned():
    X = np.array([[0.0, 0], [0.1, 1], [0.2, 0.5], [0.9, 0.1], [1.0, 0.9], [1.1, 0.4], [0.05, 0.7]])
    y = np.array([0, 0, 0, 1, 1, 1, 0])
    clf = IKNNClassifier(n_neighbors=3).fit(X, y)
    assert clf.predict([[0.0, 0.5], [1.05, 0.5]]).tolist() == [0, 1]


def test_one_feature_and_one_class():
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    clf = IKNNClassifier(n_neighbors=2).fit(X, [0, 0, 0, 1, 1, 1])
    assert [s.features for s in clf.subspaces_] == [(0,)]
    assert clf.predict([[0.5], [11.5]]).tolist() == [0, 1]
    single = IKNNClassifier().fit(X, ["a"] * 6)
    assert single.predict([[3.0]]).tolist() == ["a"]
    np.testing.assert_array_equal(single.predict_proba([[3.0]]), [[1.0]])


def test_dataframe_names_reach_the_explanation():
    X, y = load_wine(return_X_y=True, as_frame=True)
    X.index = [f"pic{i}" for i in range(len(X))]
    clf = IKNNClassifier().fit(X, y)
    assert list(clf.feature_names_) == list(X.columns)
    explanation = clf.explain(X.iloc[[3]])
    names = {n for space in explanation.subspaces for n in space.features}
    assert names <= set(X.columns)
    assert explanation.subspaces[0].neighbours[0].row_id == "pic3"


def test_scaling_inside_the_model_makes_units_irrelevant(wine):
    X, y = wine
    a = IKNNClassifier().fit(X, y)
    b = IKNNClassifier().fit(X * np.arange(1, 14) ** 3, y)
    assert [s.features for s in a.subspaces_] == [s.features for s in b.subspaces_]


def test_diversity_spreads_voters_over_features():
    X, y = load_wine(return_X_y=True)
    plain = IKNNClassifier(diversity=0.0).fit(X, y)
    diverse = IKNNClassifier(diversity=0.5).fit(X, y)
    used = lambda clf: {f for s in clf.subspaces_ for f in s.features}  # noqa: E731
    assert len(used(diverse)) > len(used(plain))
    assert plain.subspaces_ == plain.ranking_[:5]


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n_neighbors=0), "n_neighbors"),
        (dict(method="vote"), "method"),
        (dict(num_best_spaces=-2), "num_best_spaces"),
        (dict(scaling="minmax"), "scaling"),
        (dict(diversity=-1), "diversity"),
        (dict(max_spaces_tested=2.5), "max_spaces_tested"),
    ],
)
def test_bad_parameters_are_named(params, message):
    with pytest.raises(ValueError, match=message):
        IKNNClassifier(**params).fit([[0.0, 1.0], [1.0, 0.0]], [0, 1])


def test_import_does_not_install_warning_filters():
    before = list(warnings.filters)
    import frame.taste.classifier  # noqa: F401
    import frame.taste.search  # noqa: F401

    IKNNClassifier(faithful=True).fit(np.arange(12.0).reshape(6, 2), [0, 0, 0, 1, 1, 1])
    assert warnings.filters == before


def test_minus_one_means_no_cap_and_all_voters(wine):
    X, y = wine
    clf = IKNNClassifier(max_spaces_tested=-1, num_best_spaces=-1).fit(X, y)
    assert len(clf.ranking_) == 13 * 12 // 2
    assert len(clf.subspaces_) == len(clf.ranking_)
    capped = IKNNClassifier(max_spaces_tested=10).fit(X, y)  # ceil(sqrt(20)) = 5 features → 10 pairs
    assert len(capped.ranking_) == 10
