"""The builder's activations, one graph each, run by the engine against their formulas (the UNet, text
encoder and VAE fixtures cover the rest of the layers in place; relu is TAESD's, built later)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import FLOAT, GraphBuilder
from frame.engine import load_model

X = np.linspace(-4, 4, 33, dtype=np.float32).reshape(3, 11)
ERF = np.vectorize(math.erf)
FORMULAS = {
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + ERF(x / math.sqrt(2))),
    "quick_gelu": lambda x: x / (1 + np.exp(-1.702 * x)),
    "relu": lambda x: np.maximum(x, 0),
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_activation(name, tmp_path):
    g = GraphBuilder("act")
    x = g.input("x", FLOAT, ["n", 11])
    g.output(L.activation(g, name, x, "act"), "y", FLOAT, ["n", 11])
    onnx.save(g.model(), tmp_path / "m.onnx")
    with load_model(tmp_path / "m.onnx") as model:
        got = model.run({"x": X})["y"]
    np.testing.assert_allclose(got, FORMULAS[name](X.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_an_unknown_activation_is_named():
    with pytest.raises(ValueError, match="'mish'"):
        L.activation(GraphBuilder("act"), "mish", "x", "act")
