"""explain(), plot_model() and plot_prediction()."""

import json

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_wine

from frame.taste import IKNNClassifier


@pytest.fixture(scope="module")
def wine():
    data = load_wine(as_frame=True)
    return data.data, data.target.map({0: "barolo", 1: "grignolino", 2: "barbera"})


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"faithful": True},
        {"method": "simple majority"},
        {"faithful": True, "method": "simple majority", "weight_by_score": False},
    ],
)
def test_explanation_is_complete_and_consistent(wine, params):
    X, y = wine
    clf = IKNNClassifier(**params).fit(X, y)
    row = X.iloc[[70]]
    e = clf.explain(row)
    assert e.prediction == clf.predict(row)[0]
    assert e.proba == pytest.approx(dict(zip(clf.classes_, clf.predict_proba(row)[0])))
    assert len(e.subspaces) == len(clf.subspaces_)
    totals = {c: sum(s.contribution[c] for s in e.subspaces) for c in clf.classes_}
    assert totals == pytest.approx(e.proba, abs=1e-9)
    for space, fitted in zip(e.subspaces, clf.subspaces_):
        assert space.features == tuple(X.columns[list(fitted.features)])
        assert space.score == fitted.score
        assert len(space.neighbours) == clf.n_neighbors
        # distances in original units, ascending in the model's own metric
        for n in space.neighbours:
            raw = X.loc[n.row_id, list(space.features)].to_numpy()
            assert n.values == pytest.approx(tuple(raw))
            assert n.distance == pytest.approx(float(np.linalg.norm(raw - np.array(space.values))))
            assert n.label == y.loc[n.row_id]
        model_d = [n.model_distance for n in space.neighbours]
        assert model_d == sorted(model_d)
        assert space.vote == max(
            space.fractions, key=lambda c: (space.fractions[c], -list(clf.classes_).index(c))
        )
        assert space.summary.startswith("on " + " × ".join(space.features))
    json.dumps(e.to_dict())
    assert str(e).startswith(f"predicted {e.prediction}")


def test_custom_sentence_and_label_names():
    X = np.array([[0.0, 0.0], [0.1, 0.2], [0.2, 0.1], [0.3, 0.3], [3.0, 3.0], [3.1, 2.9], [2.9, 3.2]])
    y = np.array([1, 1, 1, 1, 0, 0, 0])
    clf = IKNNClassifier(n_neighbors=4).fit(
        X, y, feature_names=["warmth", "realism"], sample_ids=list("abcdefg")
    )
    e = clf.explain(
        [0.15, 0.15],
        sentence="on {space}, {count} of your {k} most similar rated pictures were {label}",
        label_names={1: "liked", 0: "disliked"},
    )
    assert e.subspaces[0].summary == "on warmth × realism, 4 of your 4 most similar rated pictures were liked"
    assert e.summary.startswith("predicted liked")
    assert {n.row_id for n in e.subspaces[0].neighbours} == {"a", "b", "c", "d"}
    with pytest.raises(ValueError, match="2 feature names"):
        IKNNClassifier().fit(X[:, :1], y, feature_names=["warmth", "realism"])


def test_explain_rejects_several_rows(wine):
    X, y = wine
    clf = IKNNClassifier().fit(X, y)
    with pytest.raises(ValueError, match="one row"):
        clf.explain(X.iloc[:2])


def _colours(path):
    return {c for _, c in Image.open(path).convert("RGB").getcolors(1 << 20)}


def test_plots_write_pngs_with_matching_class_colours(wine, tmp_path):
    from frame.taste.plots import class_colours

    X, y = wine
    clf = IKNNClassifier(num_best_spaces=2).fit(X, y)
    model_png = clf.plot_model(tmp_path / "model.png")
    pred_png = clf.plot_prediction(X.iloc[[10]], tmp_path / "pred.png")
    for path in (model_png, pred_png):
        assert Image.open(path).format == "PNG"
        present = _colours(path)
        for hexcode in class_colours(3):
            rgb = tuple(int(hexcode[i : i + 2], 16) for i in (1, 3, 5))
            assert rgb in present  # the scatter points use the palette colour exactly
    # the regions: palette colours at 25 % over white, the same hue per class
    region = tuple(round(255 + 0.25 * (int(class_colours(3)[0][i : i + 2], 16) - 255)) for i in (1, 3, 5))
    assert any(max(abs(a - b) for a, b in zip(region, c)) <= 2 for c in _colours(model_png))


def test_one_panel_and_one_feature(tmp_path):
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    clf = IKNNClassifier(n_neighbors=2).fit(X, ["no", "no", "no", "yes", "yes", "yes"])
    assert clf.plot_prediction([5.0], tmp_path / "one.png").exists()
    clf2 = IKNNClassifier(num_best_spaces=1).fit(np.c_[X, X[::-1]], [0, 0, 0, 1, 1, 1])
    assert clf2.plot_model(tmp_path / "pair.png").exists()


def test_plot_without_voters_is_a_clear_error(tmp_path):
    clf = IKNNClassifier().fit([[0.0, 1.0], [1.0, 2.0]], ["a", "a"])
    with pytest.raises(ValueError, match="nothing to plot"):
        clf.plot_model(tmp_path / "x.png")


def test_plotting_never_imports_pyplot(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from sklearn.datasets import load_iris; from frame.taste import IKNNClassifier; "
        "X, y = load_iris(return_X_y=True); "
        f"IKNNClassifier(num_best_spaces=1).fit(X, y).plot_prediction(X[0], {str(tmp_path / 'p.png')!r}); "
        "print('matplotlib.pyplot' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert (tmp_path / "p.png").exists()
