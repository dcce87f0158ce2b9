"""``Model.run_shared``: several feeds in one pass over the plan, every weight fetched once."""

from __future__ import annotations

import numpy as np
import pytest

from frame.engine import load_model
from frame.engine.errors import InputError
from frame.engine.providers import Prefetch
from tests.engine import builders


class CountingPrefetch(Prefetch):
    """The default provider, counting the weights handed to the engine."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, ref):
        self.gets += 1
        return super().get(ref)


@pytest.fixture
def mlp(tmp_path):
    proto, feeds = builders.mlp(hidden=300)
    path = builders.save(proto, tmp_path / "mlp" / "model.onnx", external=True)
    other = {"x": np.random.default_rng(5).standard_normal((3, 32)).astype(np.float32)}
    return path, [feeds, other]


def test_shared_run_equals_separate_runs_and_fetches_each_weight_once(mlp):
    path, feeds = mlp
    provider = CountingPrefetch()
    with load_model(path, weights=provider) as model:
        separate = [model.run(f)["y"] for f in feeds]
        one_run = model.last_run_fetched
        per_run = provider.gets // 2
        before_bytes = model.fetch_stats
        shared = model.run_shared(feeds)
        fetched = model.fetch_stats - before_bytes
        assert provider.gets - 2 * per_run == per_run  # one fetch per weight for both items
        assert fetched.bytes == one_run.bytes and fetched.bytes["disk"] >= sum(r.nbytes for r in model.streamed_weights)
        assert model.last_run_fetched == fetched  # what the engine recorded for that run
    for got, want in zip(shared, separate):
        assert np.array_equal(got["y"], want)


def test_shared_run_reports_progress_once_per_node(mlp):
    path, feeds = mlp
    fractions = []
    with load_model(path) as model:
        model.run_shared(feeds, progress=fractions.append)
        assert len(fractions) == len(model.steps) and fractions[-1] == 1.0


def test_shared_run_checks_every_feed(mlp):
    path, feeds = mlp
    with load_model(path) as model:
        with pytest.raises(InputError, match="'x'"):
            model.run_shared([feeds[0], {"x": np.zeros((3, 7), np.float32)}])
        assert np.array_equal(model.run(feeds[0])["y"], model.run_shared([feeds[0]])[0]["y"])  # still usable
