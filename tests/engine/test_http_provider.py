"""Models served by a real HTTP server on 127.0.0.1: Range reads, retries, clear failures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from frame.engine import load_model
from frame.engine.errors import WeightDataError, WeightFetchError
from frame.engine.providers import HttpPrefetch, Ram
from tests.engine import builders
from tests.engine.http_server import RangeServer


def _serve(http_root, external: bool, hidden: int = 64):
    root, server = http_root
    proto, feeds = builders.mlp(hidden=hidden)
    path = builders.save(proto, root / "mlp" / "model.onnx", external=external)
    expected = builders.ort_run(path, feeds)["y"]
    return server, server.url("mlp/model.onnx"), feeds, expected, path


@pytest.mark.parametrize("external", [False, True])
def test_http_model_matches_local(http_root, external):
    server, url, feeds, expected, _ = _serve(http_root, external, hidden=300)
    with load_model(url) as model:
        assert isinstance(model.provider, HttpPrefetch)
        loading_requests = len(server.requests)
        got = model.run(feeds)["y"]
        assert builders.rel_l2(got, expected) < 1e-6
        assert np.array_equal(model.run(feeds)["y"], got)
    assert all(r is not None and r.startswith("bytes=") for _, r in server.requests)
    # loading read the structure with a few range requests, skipping the embedded weights
    assert loading_requests <= 6


def test_small_contiguous_weights_are_fetched_with_one_request(http_root):
    server, url, feeds, expected, _ = _serve(http_root, external=True)
    with load_model(url) as model:
        start = len(server.requests)
        assert builders.rel_l2(model.run(feeds)["y"], expected) < 1e-6
    data_requests = [r for path, r in server.requests[start:] if path.endswith("model.onnx_data")]
    assert data_requests == ["bytes=0-12607"]  # w1, b1, w2, b2 lie back to back: one read


def test_embedded_weights_separated_by_framing_are_fetched_together(http_root):
    server, url, feeds, expected, _ = _serve(http_root, external=False)
    with load_model(url) as model:
        start = len(server.requests)
        assert builders.rel_l2(model.run(feeds)["y"], expected) < 1e-6
        spans = {(ref.offset, ref.length) for ref in model.streamed_weights}
    assert len(spans) == 8 and len(server.requests) - start == 1  # 8 tensors, a few bytes apart: one read


def test_http_ram_provider_reads_once(http_root):
    server, url, feeds, expected, _ = _serve(http_root, external=True)
    with load_model(url, weights="ram") as model:
        assert isinstance(model.provider, Ram)
        first = model.run(feeds)["y"]
        count = len(server.requests)
        second = model.run(feeds)["y"]
        assert len(server.requests) == count  # second run entirely from memory
    assert np.array_equal(first, second) and builders.rel_l2(first, expected) < 1e-6


@pytest.mark.parametrize("faults", [["500"], ["drop"], ["truncate"], ["500", "drop", "truncate", "500"]])
def test_transient_faults_are_retried_and_outputs_identical(http_root, faults):
    server, url, feeds, expected, _ = _serve(http_root, external=True)
    with load_model(url, weights=HttpPrefetch(backoff=0.01)) as model:
        start = len(server.requests)
        clean = model.run(feeds)["y"]
        before = len(server.requests)
        server.faults.extend(faults)
        faulty = model.run(feeds)["y"]
        assert len(server.requests) - before == before - start + len(faults)  # one retry per fault
    assert not server.faults
    assert np.array_equal(clean, faulty)
    assert builders.rel_l2(faulty, expected) < 1e-6


def test_rate_limit_waits_as_long_as_retry_after_asks(http_root):
    import time

    server, url, feeds, expected, _ = _serve(http_root, external=True)
    with load_model(url, weights=HttpPrefetch(backoff=0.01)) as model:
        server.faults.append("429")
        start = time.monotonic()
        got = model.run(feeds)["y"]
        assert time.monotonic() - start >= 0.2  # not the 0.01 s backoff
    assert builders.rel_l2(got, expected) < 1e-6


def test_server_ignoring_range_is_a_clear_error(http_root):
    server, url, feeds, _, _ = _serve(http_root, external=True)
    with load_model(url, weights=HttpPrefetch(backoff=0.01)) as model:
        server.faults.append("ignore_range")
        with pytest.raises(WeightFetchError, match=r"ignored the Range header \(answered 200"):
            model.run(feeds)


def test_persistent_failure_gives_up_after_retries(http_root):
    server, url, feeds, _, _ = _serve(http_root, external=True)
    with load_model(url, weights=HttpPrefetch(retries=2, backoff=0.01)) as model:
        server.faults.extend(["500"] * 3)
        with pytest.raises(WeightFetchError, match=r"failed after 2 retries over \d+ s: HTTP 500"):
            model.run(feeds)


def test_truncated_remote_weights_name_the_tensor(http_root):
    server, url, feeds, _, path = _serve(http_root, external=True)
    with load_model(url, weights=HttpPrefetch(backoff=0.01)) as model:
        os.truncate(path + "_data", 100)
        with pytest.raises(WeightDataError, match=r"weights? 'w1'"):
            model.run(feeds)


def test_missing_remote_model_is_an_error(http_root):
    _, server = http_root
    with pytest.raises(WeightFetchError, match="404"):
        load_model(server.url("nothing/model.onnx"))


def test_nothing_is_written_to_disk(http_root, tmp_path, monkeypatch):
    server, url, feeds, _, _ = _serve(http_root, external=True)
    monkeypatch.chdir(tmp_path)
    before = {p for p in tmp_path.rglob("*")}
    with load_model(url) as model:
        model.run(feeds)
    assert {p for p in tmp_path.rglob("*")} == before


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "engine" / "unet_sd15_ts17_static_external"


@pytest.mark.skipif(not (FIXTURE / "model.onnx").is_file(), reason="engine fixtures not committed")
def test_real_unet_folder_over_http_with_faults_matches_local(tmp_path):
    server = RangeServer(str(FIXTURE.parent)).start()
    try:
        with np.load(FIXTURE / "inputs.npz") as data:
            feeds = {k: data[k] for k in data.files}
        with load_model(FIXTURE / "model.onnx", weights="nocache") as local:
            expected = local.run(feeds)["out_sample"]
        with load_model(server.url(f"{FIXTURE.name}/model.onnx"), weights=HttpPrefetch(backoff=0.01)) as model:
            server.faults.extend(["drop", "ok", "500", "ok", "truncate", "ok"] * 3)  # "ok": no fault
            got = model.run(feeds)["out_sample"]
        assert not server.faults
        assert np.array_equal(got, expected)
    finally:
        server.stop()


def test_a_refused_connection_is_named_whole_in_the_retry_warning(caplog):
    """Issue 29 item 21: the retry warning cut requests' text at 200 characters, mid-word and before
    the reason ("…Failed to establish ); retry 2"). It now names the innermost reason, without object
    addresses or the URL's query values, and marks any cut."""
    import logging
    import socket

    import requests

    from frame.engine.io.http import brief, connection_problem, with_retries
    from frame.engine.io.http_settings import HttpSettings

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}/models/sd15/unet/model.onnx?token=secret-value"

    def attempt():
        try:
            requests.get(url, timeout=5)
        except requests.ConnectionError as exc:
            raise connection_problem(exc) from exc

    settings = HttpSettings(retries=1, backoff=0.0, max_backoff=0.0)
    with caplog.at_level(logging.WARNING), pytest.raises(WeightFetchError) as failed:
        with_retries(settings, "unet/model.onnx", attempt)
    [warning] = [r.getMessage() for r in caplog.records if "retry 1" in r.getMessage()]
    assert "Failed to establish a new connection: [Errno 111] Connection refused); retry 1" in warning, warning
    assert " at 0x" not in warning and "secret-value" not in warning
    assert "Connection refused" in str(failed.value)
    assert brief("word " * 60, 40) == "word word word word word word word…"
