"""The plot's numbers (``why-plot.json``, taste child → plot child): compact region rows, the same
regions whether the grid is asked about in chunks or whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_iris

from frame.taste import IKNNClassifier
from frame.taste.plot_data import GRID, PlotData, plot_data


@pytest.fixture(scope="module", params=[False, True], ids=["product", "faithful"])
def fitted(request):
    X, y = load_iris(return_X_y=True)  # many exact distance ties: the original's tie order matters
    return IKNNClassifier(num_best_spaces=3, faithful=request.param).fit(X, y), X


def test_region_rows_are_one_string_each_and_read_back(fitted):
    clf, X = fitted
    data = plot_data(clf, X[60])
    stored = json.loads(json.dumps(data.to_json()))
    for panel in stored["panels"]:
        assert len(panel["regions"]) == GRID
        assert all(isinstance(row, str) and len(row) == GRID for row in panel["regions"])
        assert set("".join(panel["regions"])) <= {"0", "1", "2"}
    assert PlotData.from_json(stored) == data


def test_rows_written_as_lists_before_are_still_read(fitted):
    clf, X = fitted
    data = plot_data(clf, X[60])
    stored = data.to_json()
    for panel, original in zip(stored["panels"], data.panels, strict=True):
        panel["regions"] = original.regions  # the form before rows were strings
    assert PlotData.from_json(json.loads(json.dumps(stored))) == data


def test_regions_are_the_vote_of_every_grid_point(fitted):
    """Asked about in chunks, each grid point still gets its subspace's vote on the whole grid."""
    clf, _ = fitted
    for index, panel in enumerate(plot_data(clf).panels):
        mesh_x, mesh_y = np.meshgrid(panel.grid_x, panel.grid_y)
        grid = np.column_stack([mesh_x.ravel(), mesh_y.ravel()])
        votes = np.argmax(clf._space_fractions(index, grid), axis=1)  # noqa: SLF001 - the whole grid at once
        np.testing.assert_array_equal(np.array(panel.regions).ravel(), votes)
