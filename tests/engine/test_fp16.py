"""fp16 weights are upcast per op and computed in float32; fp16 outputs are cast back."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from frame.engine import load_model
from frame.engine.providers import NoCache
from tests.engine import builders


class DtypeSpy(NoCache):
    def __init__(self) -> None:
        super().__init__()
        self.served = {}

    def get(self, ref):
        array = super().get(ref)
        self.served[ref.name] = array.dtype
        return array


def test_optimum_style_fp16_weights(tmp_path):
    proto, feeds = builders.fp16_weights()
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    spy = DtypeSpy()
    seen = {}
    with load_model(path, weights=spy) as model:
        model._executor.after_step = lambda i, env: seen.update({k: v.dtype for k, v in env.items()})
        got = model.run(feeds)["y"]
    assert set(spy.served.values()) == {np.dtype(np.float16)}  # stored and served as fp16...
    assert all(dtype != np.float16 for dtype in seen.values())  # ...but never computed in fp16
    assert got.dtype == np.float32
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-6


def test_fully_fp16_graph_computes_in_float32(tmp_path):
    proto, feeds = builders.fp16_graph()
    path = builders.save(proto, tmp_path / "m.onnx")
    seen = {}
    with load_model(path) as model:
        assert model.inputs[0].dtype == np.float16 and model.outputs[0].dtype == np.float16
        model._executor.after_step = lambda i, env: seen.update({k: v.dtype for k, v in env.items()})
        got = model.run(feeds)["y"]
    assert got.dtype == np.float16
    assert set(seen.values()) == {np.dtype(np.float32)}
    x = feeds["x"].astype(np.float32)
    w = numpy_helper.to_array(proto.graph.initializer[0]).astype(np.float32)
    exact = (1 / (1 + np.exp(-(x @ w) * 0.5))).astype(np.float16)
    assert builders.rel_l2(got, exact) < 1e-3  # float32 compute, one rounding to fp16 at the end
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-3  # ORT computes in fp16
