"""The builder's activations, one graph each, run by the engine against their formulas (the UNet, text
encoder and VAE fixtures cover the rest of the layers in place; relu is TAESD's, built later), and
how weights are declared and attached."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

from frame.convert.graphs import attach_weights, weight_specs
from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import FLOAT, GraphBuilder
from frame.engine import load_model
from frame.errors import FrameError

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


def _one_conv() -> onnx.ModelProto:
    g = GraphBuilder("conv")
    x = g.input("x", FLOAT, [1, 2, 4, 4])
    g.output(L.conv2d(g, x, "conv_in", 2, 3, 3), "y", FLOAT, [1, 3, 4, 4])
    return g.model()


def test_attach_weights_fills_the_declared_tensors_and_refuses_the_rest():
    structure = _one_conv()
    weights = {"conv_in.weight": np.ones((3, 2, 3, 3), np.float32), "conv_in.bias": np.zeros(3, np.float32)}
    filled = attach_weights(structure, weights)
    onnx.checker.check_model(filled)
    assert weight_specs(filled) == weight_specs(structure) == [("conv_in.weight", (3, 2, 3, 3)), ("conv_in.bias", (3,))]
    assert not structure.graph.initializer[0].raw_data  # the structure itself is left as it was
    with pytest.raises(FrameError, match="conv_in.bias"):
        attach_weights(structure, {"conv_in.weight": weights["conv_in.weight"]})
    with pytest.raises(FrameError, match=r"conv_in.weight has shape \(2, 3, 3, 3\)"):
        attach_weights(structure, {**weights, "conv_in.weight": np.ones((2, 3, 3, 3), np.float32)})
    with pytest.raises(FrameError, match="does not read, e.g. time_embedding"):
        attach_weights(structure, {**weights, "time_embedding.linear_1.weight": np.ones(1, np.float32)})
    assert len(attach_weights(structure, {**weights, "extra": np.ones(1)}, strict=False).graph.initializer) == 2


def test_a_weight_declared_twice_must_keep_its_shape():
    g = GraphBuilder("twice")
    g.weight("w", (2, 3))
    assert g.weight("w", (2, 3)) == "w"
    with pytest.raises(ValueError, match="declared twice"):
        g.weight("w", (3, 2))
