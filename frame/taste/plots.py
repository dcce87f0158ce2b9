"""PNG pictures of an :class:`IKNNClassifier`: one panel per voting subspace.

Each panel shows the training rows coloured by class over the subspace's own decision regions, in
the same colours (a region is the class that subspace would vote for there). ``plot_prediction``
adds the explained row as a star and each panel's vote in its title. matplotlib is used through its
object API with the Agg canvas: no pyplot, no global backend switch, so it works headless on the frame
and leaves a notebook's plotting state alone.

:func:`draw` needs only the numbers (``frame.taste.plot_data.PlotData``), not the classifier: this
module imports no scikit-learn, so the frame's plot child (``frame.worker.plotchild``) holds matplotlib
without it. ``plot_model`` and ``plot_prediction`` compute the numbers first (scikit-learn) and draw.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from frame.taste.plot_data import Panel, PlotData, plot_data

# Colour-blind-safe qualitative palette (Okabe–Ito); the same colour marks a class everywhere.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def class_colours(n_classes: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(n_classes)]


def _draw_panel(ax, panel: Panel, colours: list[str]) -> None:
    if panel.one_feature:
        ax.set_yticks([])
    mesh_x, mesh_y = np.meshgrid(panel.grid_x, panel.grid_y)
    ax.pcolormesh(
        mesh_x,
        mesh_y,
        panel.regions,
        cmap=ListedColormap(colours),
        vmin=-0.5,
        vmax=len(colours) - 0.5,
        alpha=0.25,
        shading="auto",
    )
    ax.scatter(panel.xs, panel.ys, c=[colours[c] for c in panel.point_classes], s=14, edgecolors="white",
               linewidths=0.4)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    if panel.star is not None:
        ax.scatter(
            [panel.star[0]],
            [panel.star[1]],
            marker="*",
            s=260,
            c="red",
            edgecolors="black",
            linewidths=0.8,
            zorder=5,
        )
    ax.set_title(panel.title, fontsize=9)


def draw(data: PlotData, path, *, panel_size: float = 3.6) -> Path:
    """Write the panels of ``data`` side by side, with the class legend below, to the PNG ``path``."""
    colours = class_colours(len(data.classes))
    fig = Figure(figsize=(panel_size * len(data.panels), panel_size))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(data.panels), squeeze=False)
    for i, panel in enumerate(data.panels):
        _draw_panel(axes[0, i], panel, colours)
    handles = [Line2D([], [], marker="o", ls="", color=c, label=k) for c, k in zip(colours, data.classes)]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    out = Path(os.fspath(path))
    fig.savefig(out, dpi=90)
    return out


def plot_model(clf, path, *, max_panels: int | None = None, panel_size: float = 3.6) -> Path:
    """Write the voting subspaces of ``clf`` to the PNG ``path``; returns the path."""
    return draw(plot_data(clf, max_panels=max_panels), path, panel_size=panel_size)


def plot_prediction(clf, x, path, *, max_panels: int | None = None, panel_size: float = 3.6) -> Path:
    """Like :func:`plot_model`, with row ``x`` (original units) drawn as a red star."""
    return draw(plot_data(clf, x, max_panels=max_panels), path, panel_size=panel_size)
