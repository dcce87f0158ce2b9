"""The product default must be at least as accurate as the original (issue 6, requirement 3).

Reference figures are the faithful mode's own StratifiedKFold(5) macro-F1 (raw: the published
numbers, pinned in test_faithful.py; standardised: measured by benchmarks/iknn_vs_knn.py, see
docs/iknn.md). The product mode may lose at most 0.01 on any dataset.
"""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import f1_score
from sklearn.model_selection import RepeatedStratifiedKFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.iknn_datasets import dataset
from frame.taste import IKNNClassifier
from frame.taste.search import selection_splits

ORIGINAL = {
    ("iris", False): 0.960,
    ("iris", True): 0.953,
    ("wine", False): 0.935,
    ("wine", True): 0.923,
    ("breast_cancer", False): 0.912,
    ("breast_cancer", True): 0.934,
    ("digits", False): 0.467,
    ("digits", True): 0.464,
}
LOADERS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}


def product_score(name, standardise):
    X, y = LOADERS[name](return_X_y=True)
    model = make_pipeline(StandardScaler(), IKNNClassifier()) if standardise else IKNNClassifier()
    return cross_val_score(model, X, y, cv=StratifiedKFold(5), scoring="f1_macro").mean()


@pytest.mark.parametrize(
    "name, standardise",
    [(name, std) for name in ("iris", "wine") for std in (False, True)]
    + [pytest.param("breast_cancer", std, marks=pytest.mark.slow) for std in (False, True)],
)
def test_bundled_datasets(name, standardise):
    """breast_cancer (569 x 30, about a minute of the suite) runs in .ci/run's slow stage, with digits."""
    assert product_score(name, standardise) >= ORIGINAL[(name, standardise)] - 0.01


@pytest.mark.slow
@pytest.mark.parametrize("name, standardise", [("digits", False), ("digits", True)])
def test_digits(name, standardise):
    assert product_score(name, standardise) >= ORIGINAL[(name, standardise)] - 0.01


def scale_weighted_task(noise_columns):
    """One informative column in large units beside unit-scale noise: the original's raw distances
    weight the informative column ~100×, frame's scaling inside the model weights them equally."""
    rng = np.random.default_rng(1)
    y = np.repeat([0, 1], 60)
    signal = (y + rng.normal(0, 0.6, len(y))) * 100.0
    return np.column_stack([signal] + [rng.normal(0, 1, len(y)) for _ in range(noise_columns)]), y


@pytest.mark.parametrize("noise_columns", [1, 2])
def test_default_chooses_the_original_where_it_wins(noise_columns):
    """Issue 13 item 27: frame's search alone lost 0.016-0.017 macro-F1 to the original here."""
    X, y = scale_weighted_task(noise_columns)

    def cv(**params):
        return cross_val_score(IKNNClassifier(**params), X, y, cv=StratifiedKFold(5), scoring="f1_macro").mean()

    original = cv(faithful=True)
    assert cv(select_by_cv=False) < original - 0.01  # the old default's loss, still reproducible
    assert cv() >= original - 0.01


def test_selection_scores_and_explanations_follow_the_chosen_mode():
    X, y = scale_weighted_task(1)
    model = IKNNClassifier().fit(X, y)
    assert set(model.selection_scores_) == {"product", "faithful"}
    assert model.mode_ == max(model.selection_scores_, key=lambda m: (model.selection_scores_[m], m == "product"))
    again = IKNNClassifier(faithful=model.mode_ == "faithful", select_by_cv=False).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), again.predict_proba(X))
    explanation = model.explain(X[0])
    assert sum(sum(v.contribution.values()) for v in explanation.subspaces) == pytest.approx(1.0)
    assert IKNNClassifier(select_by_cv=False).fit(X, y).mode_ == "product"
    assert IKNNClassifier(faithful=True).fit(X, y).selection_scores_ == {}


def repeated_gap(X, y, standardise, **params):
    """Mean over RepeatedStratifiedKFold(5 × 3, random_state=0) of default − faithful macro-F1, paired
    on the same splits, as benchmarks/iknn_vs_knn.py measures it."""
    gaps = []
    for train, test in RepeatedStratifiedKFold(n_splits=5, n_repeats=3, random_state=0).split(X, y):
        X_train, X_test = X[train], X[test]
        if standardise:
            scaler = StandardScaler().fit(X_train)
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        scores = [
            f1_score(y[test], IKNNClassifier(**kw).fit(X_train, y[train]).predict(X_test), average="macro")
            for kw in (params, {"faithful": True})
        ]
        gaps.append(scores[0] - scores[1])
    return float(np.mean(gaps))


def test_repeated_inner_cv_keeps_the_default_within_001_of_the_original():
    """Issue 13 item 27: on 20 rows (linnerud split at its median, standardised) one inner 5-fold
    run picked the worse search often enough to lose 0.016 to the original on the repeated
    benchmark; two inner repeats pick better (+0.038)."""
    X, y = dataset("linnerud>median")
    assert repeated_gap(X, y, True, selection_repeats=1) < -0.01  # the old default's loss
    assert repeated_gap(X, y, True) >= -0.01


def test_selection_repeats_is_validated_and_splits_are_paired():
    with pytest.raises(ValueError, match="selection_repeats"):
        IKNNClassifier(selection_repeats=0).fit(np.eye(4), [0, 0, 1, 1])
    y = np.repeat([0, 1], 10)
    one, two = selection_splits(y, 1), selection_splits(y, 2)
    assert len(one) == 5 and len(two) == 10
    assert all((a[1] == b[1]).all() for a, b in zip(one, two[:5]))  # first repeat = the unshuffled folds
    assert not all((a[1] == b[1]).all() for a, b in zip(two[:5], two[5:]))
