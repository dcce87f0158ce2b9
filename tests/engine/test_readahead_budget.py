"""``Model.set_readahead``: a loaded model's provider reads ahead within the new budget from then on
(the render sets the budget tonight's memory plan chose, ``frame.diffusion.readahead``)."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from frame.engine import load_model
from frame.engine.providers import NoCache, Prefetch
from tests.engine import builders


def _model(tmp_path):
    """A small weight (80 bytes), then two 4000-byte ones."""
    weights = {"s": np.ones((20,), np.float32), "b0": np.full((50, 20), 1, np.float32),
               "b1": np.full((50, 20), 2, np.float32)}
    nodes = [helper.make_node("Add", ["x", "s"], ["a"]), helper.make_node("MatMul", ["b0", "a"], ["m0"]),
             helper.make_node("MatMul", ["b1", "a"], ["m1"]), helper.make_node("Add", ["m0", "m1"], ["y"])]
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    proto = builders.model(nodes, [builders.value("x", [20])], [builders.value("y", [50])], inits)
    return builders.save(proto, tmp_path / "m.onnx", external=True)


def test_a_larger_budget_set_after_loading_reads_the_next_weight_ahead(tmp_path):
    path = _model(tmp_path)
    provider = Prefetch(budget_bytes=100)
    with load_model(path, weights=provider) as model:
        refs = {r.name: r for r in model.streamed_weights}

        def ready_within(name, seconds):
            with provider._cond:
                return provider._cond.wait_for(lambda: refs[name].index in provider._ready, timeout=seconds)

        provider.get(refs["s"])
        provider.release(refs["s"])
        assert not ready_within("b0", 0.3)  # 4000 bytes do not fit 100
        assert model.set_readahead(5000) and provider.budget_bytes == 5000
        assert ready_within("b0", 5.0)  # now they do, while nothing else is held
        assert not ready_within("b1", 0.3)  # 4000 more would not
        provider.get(refs["b0"])
        provider.release(refs["b0"])
        provider.get(refs["b1"])
        provider.release(refs["b1"])
        feeds = {"x": np.arange(20, dtype=np.float32)}
        assert builders.rel_l2(model.run(feeds)["y"], builders.ort_run(path, feeds)["y"]) < 1e-6


def test_providers_that_read_nothing_ahead_say_so(tmp_path):
    with load_model(_model(tmp_path), weights=NoCache()) as model:
        assert model.set_readahead(32 << 20) is False
