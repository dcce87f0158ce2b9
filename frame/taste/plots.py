"""PNG pictures of an :class:`IKNNClassifier`: one panel per voting subspace.

Each panel shows the training rows coloured by class over the subspace's own decision regions, in
the same colours (a region is the class that subspace would vote for there). ``plot_prediction``
adds the explained row as a star and each panel's vote in its title. matplotlib is imported lazily
and used through its object API with the Agg canvas: no pyplot, no global backend switch, so it
works headless on the frame and leaves a notebook's plotting state alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from sklearn.utils.validation import check_is_fitted, validate_data

# Colour-blind-safe qualitative palette (Okabe–Ito); the same colour marks a class everywhere.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_GRID = 120


def class_colours(n_classes: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(n_classes)]


def _span(values: np.ndarray, extra: float | None = None) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    if extra is not None:
        low, high = min(low, extra), max(high, extra)
    pad = 0.05 * (high - low) or 0.5
    return np.linspace(low - pad, high + pad, _GRID)


def _draw_panel(ax, clf, index: int, colours: list[str], row: np.ndarray | None) -> None:
    features = list(clf.subspaces_[index].features)
    names = [clf.feature_names_[f] for f in features]
    train = clf.X_train_[:, features]
    point_colours = [colours[c] for c in clf.y_train_]
    star = None if row is None else row[features]
    gx = _span(train[:, 0], None if star is None else star[0])
    if len(features) == 2:
        gy = _span(train[:, 1], None if star is None else star[1])
        mesh_x, mesh_y = np.meshgrid(gx, gy)
        grid = np.column_stack([mesh_x.ravel(), mesh_y.ravel()])
        ys, xs = train[:, 1], train[:, 0]
    else:  # a one-feature model: regions along x, points spread on a dummy y axis
        gy = np.array([-1.0, 1.0])
        mesh_x, mesh_y = np.meshgrid(gx, gy)
        grid = gx[:, None]
        xs, ys = train[:, 0], np.zeros(len(train))
        ax.set_yticks([])
    regions = np.argmax(clf._space_fractions(index, grid), axis=1)
    if len(features) == 1:
        regions = np.tile(regions, (2, 1))
    cmap = ListedColormap(colours)
    ax.pcolormesh(
        mesh_x,
        mesh_y,
        regions.reshape(mesh_x.shape),
        cmap=cmap,
        vmin=-0.5,
        vmax=len(colours) - 0.5,
        alpha=0.25,
        shading="auto",
    )
    ax.scatter(xs, ys, c=point_colours, s=14, edgecolors="white", linewidths=0.4)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1] if len(names) == 2 else "")
    title = f"{' × '.join(names)}  (score {clf.subspaces_[index].score:.2f})"
    if star is not None:
        vote = clf.classes_[int(np.argmax(clf._space_fractions(index, star[None, :])[0]))]
        ax.scatter(
            [star[0]],
            [star[1] if len(star) == 2 else 0.0],
            marker="*",
            s=260,
            c="red",
            edgecolors="black",
            linewidths=0.8,
            zorder=5,
        )
        title += f"\nvotes {vote}"
    ax.set_title(title, fontsize=9)


def _plot(clf, path, row: np.ndarray | None, max_panels: int, panel_size: float) -> Path:
    check_is_fitted(clf)
    if not clf.subspaces_:
        raise ValueError("the model has no voting subspaces (one class or one row): nothing to plot")

    count = len(clf.subspaces_) if max_panels is None else min(max_panels, len(clf.subspaces_))
    colours = class_colours(len(clf.classes_))
    fig = Figure(figsize=(panel_size * count, panel_size))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, count, squeeze=False)
    for i in range(count):
        _draw_panel(axes[0, i], clf, i, colours, row)
    handles = [
        Line2D([], [], marker="o", ls="", color=c, label=str(k)) for c, k in zip(colours, clf.classes_)
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    out = Path(os.fspath(path))
    fig.savefig(out, dpi=90)
    return out


def plot_model(clf, path, *, max_panels: int | None = None, panel_size: float = 3.6) -> Path:
    """Write the voting subspaces of ``clf`` to the PNG ``path``; returns the path."""
    return _plot(clf, path, None, max_panels, panel_size)


def plot_prediction(clf, x, path, *, max_panels: int | None = None, panel_size: float = 3.6) -> Path:
    """Like :func:`plot_model`, with row ``x`` (original units) drawn as a red star."""

    X = x if hasattr(x, "iloc") else np.asarray(x, dtype=float).reshape(1, -1)
    X = validate_data(clf, X, reset=False, dtype=np.float64)
    if X.shape[0] != 1:
        raise ValueError(f"plot_prediction() takes one row, got {X.shape[0]}")
    return _plot(clf, path, X[0], max_panels, panel_size)
