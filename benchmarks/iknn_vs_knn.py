"""ikNN (faithful and product) against scikit-learn's kNN, measured in one run.

Datasets: the bundled scikit-learn sets (iris, wine, breast_cancer, digits) and seeded
``make_classification`` sets whose columns get uneven scales (×10^-2 … ×10^3), each on raw and on
standardised inputs. Score: mean macro-F1 over StratifiedKFold(5) without shuffle. Models:
kNN(5) for reference, ikNN faithful (the original's behaviour) and ikNN product (frame's
default, which picks between its own search and the original's by inner CV on each training
fold). Also times one fit on 1,000 rows × 8 features. Writes the table between the benchmark markers of docs/iknn.md.

    python benchmarks/iknn_vs_knn.py            # full run (several minutes on 2 cores)
    python benchmarks/iknn_vs_knn.py --quick    # iris, wine and one set per family, no docs update
    python benchmarks/iknn_vs_knn.py --only noisy   # the sets whose name contains "noisy"
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

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
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from frame.taste import IKNNClassifier  # noqa: E402

DOC = ROOT / "docs" / "iknn.md"
START, END = "<!-- benchmark:start -->", "<!-- benchmark:end -->"
MODELS = {
    "kNN(5)": lambda: KNeighborsClassifier(),
    "ikNN faithful": lambda: IKNNClassifier(faithful=True),
    "ikNN product": lambda: IKNNClassifier(),
}


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
        n_samples=int(rng.integers(150, 400)), n_features=informative + int(rng.integers(12, 31)),
        n_informative=informative, n_redundant=0, n_repeated=0, n_classes=int(rng.integers(2, 4)),
        n_clusters_per_class=1, class_sep=float(rng.uniform(0.8, 1.5)), shuffle=True, random_state=100 + seed,
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
        n_samples=int(rng.integers(200, 500)), n_features=n_features,
        n_informative=int(rng.integers(2, 5)), n_redundant=int(rng.integers(0, 2)),
        n_classes=n_classes, n_clusters_per_class=1, weights=weights, class_sep=float(rng.uniform(0.7, 1.5)),
        random_state=200 + seed,
    )
    return _uneven(X, rng), y


def few_rows(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """25-60 rows, as an owner's first weeks of ratings (two classes, at least 10 rows each)."""
    rng = np.random.default_rng(300 + seed)
    n_features = int(rng.integers(4, 10))
    X, y = make_classification(
        n_samples=int(rng.integers(25, 61)), n_features=n_features,
        n_informative=int(rng.integers(2, min(4, n_features) + 1)), n_redundant=0, n_classes=2,
        n_clusters_per_class=1, class_sep=float(rng.uniform(0.6, 1.4)), flip_y=0.05, random_state=300 + seed,
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
FAMILIES = {"synthetic": (synthetic, 20), "noisy": (noisy, 8), "imbalanced": (imbalanced, 8),
            "few-rows": (few_rows, 8), "shapes": (shapes, 4)}


def datasets(quick: bool, only: str | None = None):
    """Every bundled scikit-learn set, then the seeded families (48 sets in all; --quick: 7)."""
    for name in ["iris", "wine"] if quick else BUNDLED:
        yield name, BUNDLED[name](return_X_y=True)
    for family, (make, count) in FAMILIES.items():
        for seed in range(1 if quick else count):
            yield f"{family}-{seed:02d}", make(seed)


def score(make, X, y, standardise: bool) -> float:
    model = make_pipeline(StandardScaler(), make()) if standardise else make()
    return float(cross_val_score(model, X, y, cv=StratifiedKFold(5), scoring="f1_macro").mean())


def fit_times() -> dict[str, float]:
    X, y = make_classification(n_samples=1000, n_features=8, n_informative=4, random_state=0)
    times = {}
    for name, make in MODELS.items():
        start = time.perf_counter()
        make().fit(X, y)
        times[name] = time.perf_counter() - start
    return times


def table(rows: list[tuple[str, str, dict[str, float]]], times: dict[str, float]) -> str:
    names = list(MODELS)
    lines = ["| dataset | inputs | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for dataset, inputs, scores in rows:
        best = max(round(v, 3) for v in scores.values())
        cells = [f"**{scores[n]:.3f}**" if round(scores[n], 3) == best else f"{scores[n]:.3f}" for n in names]
        lines.append(f"| {dataset} | {inputs} | " + " | ".join(cells) + " |")
    for inputs in ("raw", "standardised"):
        subset = [s for _, i, s in rows if i == inputs]
        means = [np.mean([s[n] for s in subset]) for n in names]
        lines.append(
            f"| **mean ({len(subset)} sets)** | {inputs} | " + " | ".join(f"{m:.3f}" for m in means) + " |"
        )
    lines.append("| fit time, 1,000 × 8 | raw | " + " | ".join(f"{times[n]:.2f} s" for n in names) + " |")
    return "\n".join(lines)


def write_doc(text: str, command: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC}: benchmark markers missing")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    stamp = f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, scikit-learn StratifiedKFold(5), macro-F1)."
    DOC.write_text(f"{head}{START}\n{stamp}\n\n{text}\n{END}{tail}", encoding="utf-8")


def worst_gaps(rows: list[tuple[str, str, dict[str, float]]]) -> list[tuple[float, str, str]]:
    """(product − faithful, dataset, inputs) for every row, worst first."""
    gaps = [(s["ikNN product"] - s["ikNN faithful"], name, inputs) for name, inputs, s in rows]
    return sorted(gaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small subset, does not touch docs/")
    parser.add_argument(
        "--only", help="only datasets whose name contains one of these comma-separated texts (no docs update)"
    )
    args = parser.parse_args()
    rows = []
    for name, (X, y) in datasets(args.quick):
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        for standardise in (False, True):
            inputs = "standardised" if standardise else "raw"
            start = time.perf_counter()
            scores = {model: score(make, X, y, standardise) for model, make in MODELS.items()}
            rows.append((name, inputs, scores))
            shown = "  ".join(f"{k}={v:.3f}" for k, v in scores.items())
            print(f"{name:16s} {inputs:12s} {shown}  ({time.perf_counter() - start:.0f} s)", flush=True)
    times = fit_times()
    print("fit 1000x8:", "  ".join(f"{k}={v:.2f}s" for k, v in times.items()))
    text = table(rows, times)
    print(text)
    gaps = worst_gaps(rows)
    gap, name, inputs = gaps[0]
    losses = sum(g < -0.01 for g, _, _ in gaps)
    summary = (
        f"Worst gap, ikNN product − ikNN faithful: {gap:+.3f} ({name}, {inputs}); "
        f"{losses} of {len(gaps)} rows lose by more than 0.01."
    )
    print(summary)
    if not args.quick and not args.only:
        write_doc(f"{text}\n\n{summary}", "python benchmarks/iknn_vs_knn.py")


if __name__ == "__main__":
    main()
