"""The data sets of benchmarks/iknn_vs_knn.py, kept apart so tests can rebuild one of them exactly.

Every bundled scikit-learn classification set, the two bundled regression sets split at their
median, and seeded ``make_classification`` families whose columns get uneven scales
(x10^-2 ... x10^3), as real features measured in different units.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_iris,
    load_linnerud,
    load_wine,
    make_circles,
    make_classification,
    make_gaussian_quantiles,
    make_hastie_10_2,
    make_moons,
)


def _uneven(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Columns multiplied by 10^-2 … 10^3, as real features measured in different units."""
    return X * 10.0 ** rng.uniform(-2, 3, size=X.shape[1])


def synthetic(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded classification task with columns on wildly different scales."""
    rng = np.random.default_rng(seed)
    n_features = int(rng.integers(6, 13))
    X, y = make_classification(
        n_samples=int(rng.integers(150, 400)),
        n_features=n_features,
        n_informative=int(rng.integers(2, min(6, n_features) + 1)),
        n_redundant=int(rng.integers(0, 3)),
        n_classes=int(rng.integers(2, 4)),
        n_clusters_per_class=1,
        class_sep=float(rng.uniform(0.6, 1.5)),
        random_state=seed,
    )
    return _uneven(X, rng), y


def noisy(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two to four informative columns hidden among 12-30 pure-noise ones (uneven scales)."""
    rng = np.random.default_rng(100 + seed)
    informative = int(rng.integers(2, 5))
    X, y = make_classification(
        n_samples=int(rng.integers(150, 400)),
        n_features=informative + int(rng.integers(12, 31)),
        n_informative=informative,
        n_redundant=0,
        n_repeated=0,
        n_classes=int(rng.integers(2, 4)),
        n_clusters_per_class=1,
        class_sep=float(rng.uniform(0.8, 1.5)),
        shuffle=True,
        random_state=100 + seed,
    )
    return _uneven(X, rng), y


def imbalanced(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A minority class of 8-20 % of the rows (two or three classes), uneven scales."""
    rng = np.random.default_rng(200 + seed)
    n_classes = int(rng.integers(2, 4))
    minority = float(rng.uniform(0.08, 0.2))
    weights = [minority] + [(1 - minority) / (n_classes - 1)] * (n_classes - 1)
    n_features = int(rng.integers(6, 12))
    X, y = make_classification(
        n_samples=int(rng.integers(200, 500)),
        n_features=n_features,
        n_informative=int(rng.integers(2, 5)),
        n_redundant=int(rng.integers(0, 2)),
        n_classes=n_classes,
        n_clusters_per_class=1,
        weights=weights,
        class_sep=float(rng.uniform(0.7, 1.5)),
        random_state=200 + seed,
    )
    return _uneven(X, rng), y


def few_rows(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """25-60 rows, as an owner's first weeks of ratings (two classes, at least 10 rows each)."""
    rng = np.random.default_rng(300 + seed)
    n_features = int(rng.integers(4, 10))
    X, y = make_classification(
        n_samples=int(rng.integers(25, 61)),
        n_features=n_features,
        n_informative=int(rng.integers(2, min(4, n_features) + 1)),
        n_redundant=0,
        n_classes=2,
        n_clusters_per_class=1,
        class_sep=float(rng.uniform(0.6, 1.4)),
        flip_y=0.05,
        random_state=300 + seed,
    )
    return _uneven(X, rng), y


def shapes(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-linear two-feature classes (moons, circles, Gaussian quantiles, XOR-like Hastie) plus
    a few noise columns."""
    rng = np.random.default_rng(400 + seed)
    n = int(rng.integers(150, 350))
    kind = seed % 4
    if kind == 0:
        X, y = make_moons(n, noise=0.25, random_state=400 + seed)
    elif kind == 1:
        X, y = make_circles(n, noise=0.1, factor=0.5, random_state=400 + seed)
    elif kind == 2:
        X, y = make_gaussian_quantiles(n_samples=n, n_features=2, n_classes=3, random_state=400 + seed)
    else:
        X, y = make_hastie_10_2(n, random_state=400 + seed)
    X = np.hstack([X, rng.standard_normal((n, int(rng.integers(2, 6))))])
    return _uneven(X, rng), y


def _median_split(load):
    """A bundled regression set as a two-class task: target above its median or not."""

    def loader(return_X_y: bool = True):
        X, target = load(return_X_y=True)
        target = target[:, 0] if target.ndim > 1 else target
        return X, (target > np.median(target)).astype(int)

    return loader


BUNDLED = {
    "iris": load_iris,
    "wine": load_wine,
    "breast_cancer": load_breast_cancer,
    "digits": load_digits,
    "diabetes>median": _median_split(load_diabetes),
    "linnerud>median": _median_split(load_linnerud),
}
FAMILIES = {
    "synthetic": (synthetic, 20),
    "noisy": (noisy, 8),
    "imbalanced": (imbalanced, 8),
    "few-rows": (few_rows, 8),
    "shapes": (shapes, 4),
}


def datasets(quick: bool = False, only: str | None = None):
    """Yield ``(name, (X, y))``: every bundled scikit-learn set, then the seeded families (54 sets
    in all; ``quick``: iris, wine and one set per family). ``only``: comma-separated texts, keep
    the sets whose name contains one of them."""
    names = ["iris", "wine"] if quick else list(BUNDLED)
    names += [
        f"{family}-{seed:02d}" for family, (_, count) in FAMILIES.items() for seed in range(1 if quick else count)
    ]
    for name in names:
        if only is None or any(part in name for part in only.split(",")):
            yield name, dataset(name)


def dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """One data set by its benchmark name (``iris``, ``synthetic-18``, ...)."""
    if name in BUNDLED:
        return BUNDLED[name](return_X_y=True)
    family, _, seed = name.rpartition("-")
    if family not in FAMILIES or not seed.isdigit() or int(seed) >= FAMILIES[family][1]:
        known = ", ".join(list(BUNDLED) + [f"{f}-00..{c - 1:02d}" for f, (_, c) in FAMILIES.items()])
        raise ValueError(f"unknown benchmark data set {name!r}; known: {known}")
    return FAMILIES[family][0](int(seed))
