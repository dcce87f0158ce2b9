"""ikNN (faithful and product) against scikit-learn's kNN, measured in one run.

Datasets: the bundled scikit-learn sets (iris, wine, breast_cancer, digits) and seeded
``make_classification`` sets whose columns get uneven scales (×10^-2 … ×10^3), each on raw and on
standardised inputs. Score: mean macro-F1 over StratifiedKFold(5) without shuffle. Models:
kNN(5), kNN grid-searched (k and weights, inner 5-fold CV inside every outer fold), ikNN faithful
(the original's behaviour) and ikNN product (frame's default). Also times one fit on 1,000 rows ×
8 features. Writes the table between the benchmark markers of docs/iknn.md.

    python benchmarks/iknn_vs_knn.py            # full run (several minutes on 2 cores)
    python benchmarks/iknn_vs_knn.py --quick    # iris, wine and 3 synthetic sets, no docs update
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine, make_classification
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
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
    "kNN grid": lambda: GridSearchCV(
        KNeighborsClassifier(),
        {"n_neighbors": [1, 3, 5, 7, 9, 15, 21, 31], "weights": ["uniform", "distance"]},
        cv=5,
        scoring="f1_macro",
    ),
    "ikNN faithful": lambda: IKNNClassifier(faithful=True),
    "ikNN product": lambda: IKNNClassifier(),
}


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
    return X * 10.0 ** rng.uniform(-2, 3, size=n_features), y


def datasets(quick: bool, n_synthetic: int):
    bundled = {
        "iris": load_iris,
        "wine": load_wine,
        "breast_cancer": load_breast_cancer,
        "digits": load_digits,
    }
    for name in ["iris", "wine"] if quick else bundled:
        yield name, bundled[name](return_X_y=True)
    for seed in range(3 if quick else n_synthetic):
        yield f"synthetic-{seed:02d}", synthetic(seed)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small subset, does not touch docs/")
    parser.add_argument("--synthetic", type=int, default=20, help="number of make_classification sets")
    args = parser.parse_args()
    rows = []
    for name, (X, y) in datasets(args.quick, args.synthetic):
        for standardise in (False, True):
            inputs = "standardised" if standardise else "raw"
            start = time.perf_counter()
            scores = {model: score(make, X, y, standardise) for model, make in MODELS.items()}
            rows.append((name, inputs, scores))
            shown = "  ".join(f"{k}={v:.3f}" for k, v in scores.items())
            print(f"{name:14s} {inputs:12s} {shown}  ({time.perf_counter() - start:.0f} s)", flush=True)
    times = fit_times()
    print("fit 1000x8:", "  ".join(f"{k}={v:.2f}s" for k, v in times.items()))
    text = table(rows, times)
    print(text)
    if not args.quick:
        write_doc(text, "python benchmarks/iknn_vs_knn.py")


if __name__ == "__main__":
    main()
