"""What the taste model's plot shows, as plain numbers: one panel per voting subspace of an
:class:`IKNNClassifier` (training points, decision regions on a grid, the explained row as a star).

Why separate from the drawing (``frame.taste.plots``): the numbers need the fitted classifier, so
scikit-learn and scipy; the drawing needs only matplotlib. On the frame the trained model chooses in a
short child of the render worker (``frame.worker.tastechild``) that holds scikit-learn; importing
matplotlib there as well made it the largest process beside the waiting worker (201 MiB on x86,
41 of them the plot). The child now writes these numbers (:meth:`PlotData.to_json`) and a second
child with matplotlib but no scikit-learn draws them (``frame.worker.plotchild``), so the two never
share a process. JSON keeps float64 exactly, so the picture is the same either way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

GRID = 120  # grid points per axis of a panel's decision regions
# Grid points asked about at once. The whole 14,400-point grid in one call held the searches' results
# (indices and distances of k neighbours per point, twice while stacked: 3.9 MiB with k = 8) at the
# taste child's peak; the regions are the same row by row.
GRID_CHUNK = 1024


@dataclass(frozen=True)
class Panel:
    """One voting subspace: axis names, the training rows' points and class indices, the grid's x and y
    values and the region each grid point votes for (class index, rows along y), the star (the
    explained row) and the title."""

    xlabel: str
    ylabel: str
    title: str
    one_feature: bool
    xs: list[float]
    ys: list[float]
    point_classes: list[int]
    grid_x: list[float]
    grid_y: list[float]
    regions: list[list[int]]
    star: list[float] | None


@dataclass(frozen=True)
class PlotData:
    """The whole plot: the class labels (legend, in colour order) and the panels, left to right."""

    classes: list[str]
    panels: list[Panel]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form. Each row of a panel's regions is one string, class index ``c`` as the
        character ``chr(48 + c)`` ("0", "1", ...): as lists, the 14,400 numbers of every panel went
        through ``json.dumps`` as as many small strings, 4.1 MiB of the taste child's peak on x86."""
        return {"classes": self.classes,
                "panels": [{**asdict(panel), "regions": [_row_text(row) for row in panel.regions]}
                           for panel in self.panels]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlotData:
        return cls(classes=[str(c) for c in data["classes"]],
                   panels=[Panel(**{**panel, "regions": [_row_classes(row) for row in panel["regions"]]})
                           for panel in data["panels"]])


def _row_text(row: list[int]) -> str:
    return "".join(chr(48 + c) for c in row)


def _row_classes(row: str | list[int]) -> list[int]:
    """A region row from ``to_json``; a list is a row as written before rows were strings (a job
    folder kept across an upgrade)."""
    return list(row) if isinstance(row, list) else [ord(char) - 48 for char in row]


def _span(values: np.ndarray, extra: float | None = None) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    if extra is not None:
        low, high = min(low, extra), max(high, extra)
    pad = 0.05 * (high - low) or 0.5
    return np.linspace(low - pad, high + pad, GRID)


def _panel(clf: Any, index: int, row: np.ndarray | None) -> Panel:
    features = list(clf.subspaces_[index].features)
    names = [clf.feature_names_[f] for f in features]
    train = clf.X_train_[:, features]
    star = None if row is None else row[features]
    gx = _span(train[:, 0], None if star is None else star[0])
    if len(features) == 2:
        gy = _span(train[:, 1], None if star is None else star[1])
        mesh_x, mesh_y = np.meshgrid(gx, gy)
        grid = np.column_stack([mesh_x.ravel(), mesh_y.ravel()])
        xs, ys = train[:, 0], train[:, 1]
    else:  # a one-feature model: regions along x, points spread on a dummy y axis
        gy = np.array([-1.0, 1.0])
        mesh_x, mesh_y = np.meshgrid(gx, gy)
        grid = gx[:, None]
        xs, ys = train[:, 0], np.zeros(len(train))
    regions = np.concatenate([np.argmax(clf._space_fractions(index, grid[start : start + GRID_CHUNK]), axis=1)
                              for start in range(0, len(grid), GRID_CHUNK)])
    if len(features) == 1:
        regions = np.tile(regions, (2, 1))
    title = f"{' × '.join(names)}  (score {clf.subspaces_[index].score:.2f})"
    if star is not None:
        vote = clf.classes_[int(np.argmax(clf._space_fractions(index, star[None, :])[0]))]
        title += f"\nvotes {vote}"
        star = [float(star[0]), float(star[1]) if len(star) == 2 else 0.0]
    return Panel(xlabel=names[0], ylabel=names[1] if len(names) == 2 else "", title=title,
                 one_feature=len(features) == 1, xs=xs.tolist(), ys=ys.tolist(),
                 point_classes=[int(c) for c in clf.y_train_], grid_x=gx.tolist(), grid_y=gy.tolist(),
                 regions=regions.reshape(mesh_x.shape).tolist(), star=star)


def plot_data(clf: Any, x: Any = None, *, max_panels: int | None = None) -> PlotData:
    """The panels of ``clf`` (fitted), with row ``x`` (original units, one row) as a star when given."""
    from sklearn.utils.validation import check_is_fitted, validate_data  # the plot child reads PlotData without it

    check_is_fitted(clf)
    row = None
    if x is not None:
        X = x if hasattr(x, "iloc") else np.asarray(x, dtype=float).reshape(1, -1)
        X = validate_data(clf, X, reset=False, dtype=np.float64)
        if X.shape[0] != 1:
            raise ValueError(f"plot_prediction() takes one row, got {X.shape[0]}")
        row = X[0]
    if not clf.subspaces_:
        raise ValueError("the model has no voting subspaces (one class or one row): nothing to plot")
    count = len(clf.subspaces_) if max_panels is None else min(max_panels, len(clf.subspaces_))
    return PlotData(classes=[str(k) for k in clf.classes_], panels=[_panel(clf, i, row) for i in range(count)])
