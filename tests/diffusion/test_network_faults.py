"""A night streamed from a model server that misbehaves ends in the same picture as an undisturbed one.

A real Range-capable server on 127.0.0.1 serves the demo model, with a gate that injects outages.
The client runs its real retry path (requests with real socket timeouts, backoff, give-up budget) with
an injected clock: the backoff waits advance that clock instead of sleeping, so a 60 s outage costs a
second or two of test time. The requests themselves time out for real (``timeout=0.25`` s).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from frame.diffusion import load_pipeline
from frame.engine import load_model
from frame.engine.errors import WeightFetchError
from frame.engine.io.http_settings import HttpSettings
from frame.engine.providers import HttpPrefetch
from frame.models import demo_model_path
from tests.engine.http_server import RangeServer
from tests.painting import paint

RENDER = dict(steps=2, guidance=7.5, seed=4, width=32, height=32, sampler="euler")


class FakeClock:
    """``monotonic`` and ``sleep`` for the retry loop: sleeping moves time on and returns at once."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@pytest.fixture(scope="module")
def served():
    served = RangeServer(str(demo_model_path())).start()
    served.hang_seconds = 0.4
    yield served
    served.stop()


@pytest.fixture
def server(served):
    served.gate, served.refused = None, 0
    yield served
    served.gate = None


def night(server: RangeServer, cache, clock: FakeClock, callback=None, **overrides) -> np.ndarray:
    """One render from the server with the default retry policy (only the timeout shortened)."""
    settings = HttpSettings(timeout=0.25, clock=clock, **overrides)

    def load(source: str):  # the real HTTP provider, with a small read-ahead so fetches run all through a step
        return load_model(source, weights=HttpPrefetch(budget_bytes=64 << 10, http=settings), http=settings)

    pipe = load_pipeline(server.url(""), cache_dir=cache, http=settings, loader=load)
    return np.asarray(paint(pipe, "a lighthouse", callback=callback, **RENDER))


@pytest.fixture(scope="module")
def undisturbed(served, tmp_path_factory):
    return night(served, tmp_path_factory.mktemp("calm"), FakeClock())


def test_nas_asleep_at_the_start_of_the_night(server, tmp_path, undisturbed):
    clock = FakeClock()
    server.gate = lambda path: "hang" if clock.monotonic() < 60.0 else None  # wakes a minute in
    image = night(server, tmp_path / "sleepy", clock)
    assert server.refused >= 3 and clock.now >= 60.0  # the first requests really timed out, for a minute
    assert np.array_equal(image, undisturbed)


def test_network_drops_for_30_seconds_mid_step(server, tmp_path, undisturbed):
    clock = FakeClock()
    outage = {"until": None, "at": None}

    def gate(path: str) -> str | None:
        until = outage["until"]
        return "drop" if until is not None and clock.monotonic() < until else None

    def callback(progress) -> None:
        if progress.phase == "unet" and not progress.step_done and progress.op_fraction >= 0.5 \
                and outage["until"] is None:
            outage["until"], outage["at"] = clock.monotonic() + 30.0, (progress.step, progress.op_fraction)

    server.gate = gate
    image = night(server, tmp_path / "dropped", clock, callback)
    assert outage["at"][0] == 0 and server.refused >= 3 and clock.now >= 30.0
    assert np.array_equal(image, undisturbed)


def test_an_outage_longer_than_the_budget_fails_clearly(server, tmp_path):
    clock = FakeClock()
    server.gate = lambda path: "drop"
    with pytest.raises(WeightFetchError, match=r"model_index.json failed after \d+ retries over 1\d\d s: "
                                                 r"connection problem .*is the model server on and reachable"):
        night(server, tmp_path / "gone", clock, give_up_seconds=100.0)
