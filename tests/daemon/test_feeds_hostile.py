"""Hostile feed servers and feed text: slow headers, redirect games, surrogates, encoded markup,
credentials in URLs. Each case was found by an attack on a running frame (issue 13)."""

from __future__ import annotations

import json
import time

import pytest

from frame.config import FeedSource
from frame.daemon.feeds.fetch import FeedFetcher, refresh_feeds
from tests.daemon.conftest import make_config
from tests.daemon.feedserver import FeedServer, drip_headers, redirect, reply

GOOD = json.dumps({"prompts": ["a red fox in snow", "a lighthouse"]}).encode()


@pytest.fixture
def server():
    running = FeedServer()
    yield running
    running.close()


def _config(tmp_path, *sources, **feeds):
    return make_config(tmp_path, feeds={"sources": tuple(sources), "timeout_seconds": 1.0, **feeds})


def _source(server, path, fmt="json", name="test"):
    return FeedSource(url=server.url(path), format=fmt, name=name)


def _fetcher(config, tmp_path):
    return FeedFetcher(config.feeds, tmp_path / "feeds", backoff=0.01)


# 11: one wall-clock deadline per fetch, headers included ------------------------------------------

def test_headers_dripped_byte_by_byte_hit_the_deadline_and_count_as_failure(tmp_path, server, store):
    """Each byte arrives well inside the 1 s read timeout; the headers alone would take ~20 s."""
    server.routes["/slow"] = drip_headers(0.2, b"")
    config = _config(tmp_path, _source(server, "/slow", fmt="text"))
    started = time.monotonic()
    assert refresh_feeds(store, config, _fetcher(config, tmp_path)) == {"test": 0}
    assert time.monotonic() - started < 3.0
    health = store.feed_health()[0]
    assert health.last_ok_at is None and "no complete answer within 1 s" in health.last_error


def test_slow_headers_fall_back_to_the_cached_copy(tmp_path, server, store):
    server.routes["/f"] = reply(GOOD, headers={"ETag": '"v1"'})
    config = _config(tmp_path, _source(server, "/f"))
    fetcher = _fetcher(config, tmp_path)
    refresh_feeds(store, config, fetcher)
    server.routes["/f"] = drip_headers(0.2, GOOD, "application/json")
    started = time.monotonic()
    assert refresh_feeds(store, config, fetcher) == {"test": 2}
    assert time.monotonic() - started < 3.0
    health = store.feed_health()[0]
    assert health.from_cache == 1 and "no complete answer" in health.last_error


def test_deadline_covers_retries(tmp_path, server, store):
    """503s are retried, but never past the one deadline of the fetch."""
    server.routes["/busy"] = reply(b"busy", "text/plain", status=503)
    config = _config(tmp_path, _source(server, "/busy"), timeout_seconds=0.5)
    fetcher = FeedFetcher(config.feeds, tmp_path / "feeds", attempts=10, backoff=0.2)
    started = time.monotonic()
    refresh_feeds(store, config, fetcher)
    assert time.monotonic() - started < 1.5
    assert server.hits["/busy"] < 10 and "HTTP 503" in store.feed_health()[0].last_error


# 15: redirects: http(s) only, at most 5 -----------------------------------------------------------

def test_redirects_are_followed_to_other_hosts_up_to_five(tmp_path, server, store):
    other = FeedServer()  # another host:port, as a NAS on the LAN would be
    try:
        other.routes["/feed"] = reply(GOOD)
        server.routes["/r0"] = redirect("/r1", 301)
        for hop in range(1, 4):
            server.routes[f"/r{hop}"] = redirect(server.url(f"/r{hop + 1}"), 307)
        server.routes["/r4"] = redirect(other.url("/feed"), 308)  # hop 5
        config = _config(tmp_path, _source(server, "/r0"))
        assert refresh_feeds(store, config, _fetcher(config, tmp_path)) == {"test": 2}
        assert store.feed_health()[0].last_error is None
    finally:
        other.close()


def test_sixth_redirect_is_refused(tmp_path, server, store):
    for hop in range(6):
        server.routes[f"/r{hop}"] = redirect(f"/r{hop + 1}")
    server.routes["/r6"] = reply(GOOD)
    config = _config(tmp_path, _source(server, "/r0"))
    assert refresh_feeds(store, config, _fetcher(config, tmp_path)) == {"test": 0}
    assert "more than 5 redirects" in store.feed_health()[0].last_error
    assert "/r6" not in server.hits


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/feed.json", "gopher://x/",
                                    "data:application/json,{}"])
def test_redirect_to_another_scheme_is_refused(tmp_path, server, store, target):
    server.routes["/f"] = redirect(target)
    config = _config(tmp_path, _source(server, "/f"))
    assert refresh_feeds(store, config, _fetcher(config, tmp_path)) == {"test": 0}
    error = store.feed_health()[0].last_error
    assert f"redirected to a {target.split(':')[0]}: URL" in error and "only http(s)" in error


def test_https_sockets_are_cut_at_the_deadline_too():
    """The https pool uses the watched connection class, whose socket (made before the TLS handshake,
    which a slow server could drip as well) is shut down when the deadline passes."""
    import socket

    from frame.net.deadline import Deadline, DeadlineSession, _WatchedHTTPSConnection

    pool = DeadlineSession().get_adapter("https://nas.local/").poolmanager.connection_from_url("https://nas.local/")
    assert pool.ConnectionCls is _WatchedHTTPSConnection
    with socket.create_server(("127.0.0.1", 0)) as listener:
        connection = _WatchedHTTPSConnection("127.0.0.1", listener.getsockname()[1], timeout=5)
        started = time.monotonic()
        with Deadline(0.3):
            sock = connection._new_conn()
            assert sock.recv(1) == b""  # would block for 5 s: the deadline's shutdown ends it
        assert 0.25 < time.monotonic() - started < 2.0
        sock.close()


# 12: a lone surrogate never stops the feed job ------------------------------------------------------

def test_lone_surrogate_is_dropped_and_other_feeds_still_run(tmp_path, server, store):
    # json.dumps escapes the surrogate as \ud800: a valid JSON document, which decodes to a lone surrogate
    server.routes["/bad"] = reply(json.dumps({"prompts": ["a fox \ud800in snow", "\udfff"]}).encode())
    server.routes["/good"] = reply(GOOD)
    config = _config(tmp_path, _source(server, "/bad", name="bad"), _source(server, "/good", name="good"))
    assert refresh_feeds(store, config, _fetcher(config, tmp_path)) == {"bad": 1, "good": 2}
    prompts = {i["feed"]: i["prompt"] for i in store.feed_items() if i["feed"] == "bad"}
    assert prompts == {"bad": "a fox in snow"}
    assert all(h.last_error is None for h in store.feed_health())


def test_one_feed_failing_in_the_store_does_not_stop_the_others(tmp_path, server, store, monkeypatch):
    server.routes["/a"] = reply(GOOD)
    server.routes["/b"] = reply(GOOD)
    config = _config(tmp_path, _source(server, "/a", name="a"), _source(server, "/b", name="b"))
    real = store.replace_feed_items

    def failing(feed, items):
        if feed == "a":
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return real(feed, items)

    monkeypatch.setattr(store, "replace_feed_items", failing)
    assert refresh_feeds(store, config, _fetcher(config, tmp_path))["b"] == 2
    health = {h.name: h for h in store.feed_health()}
    assert "UnicodeEncodeError" in health["a"].last_error and health["b"].last_error is None


def test_api_prompt_with_a_lone_surrogate_is_stored_without_it(config, store, tmp_path):
    from frame.daemon.http.app import create_app

    client = create_app(config, store, token="owner-token-for-tests", state_dir=tmp_path).test_client()
    response = client.post("/api/prompts", data=b'{"prompt": "a heron \\ud800at dusk", "theme": "\\udc00"}',
                           content_type="application/json", headers={"Authorization": "Bearer owner-token-for-tests"})
    assert response.status_code == 201, response.get_json()
    assert [(p.prompt, p.theme) for p in store.queued_prompts()] == [("a heron at dusk", "")]


# 13: entity-encoded markup never becomes a tag ------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("&lt;img src=x onerror=alert(1)&gt; a cat", "a cat"),
    ("&amp;lt;script&amp;gt;alert(1)&amp;lt;/script&amp;gt; a dog", "alert(1) a dog"),
    ("<b>bold</b> &amp; plain", "bold & plain"),
    ("an unclosed &lt;img src=x onerror=alert(1) tag", "an unclosed img src=x onerror=alert(1) tag"),
    ("5 &gt; 3 and 2 &lt; 4", "5 3 and 2 4"),
])
def test_encoded_markup_is_stored_as_plain_text(tmp_path, server, store, raw, expected):
    server.routes["/f"] = reply(json.dumps({"prompts": [raw]}).encode())
    config = _config(tmp_path, _source(server, "/f"))
    refresh_feeds(store, config, _fetcher(config, tmp_path))
    (item,) = store.feed_items()
    assert item["prompt"] == expected and "<" not in item["prompt"] and ">" not in item["prompt"]


def test_api_returns_queued_prompts_without_markup(config, store, tmp_path):
    from frame.daemon.http.app import create_app

    client = create_app(config, store, token="owner-token-for-tests", state_dir=tmp_path).test_client()
    client.post("/api/prompts", json={"prompt": "&lt;img src=x onerror=alert(1)&gt;a moth"},
                headers={"Authorization": "Bearer owner-token-for-tests"})
    assert client.get("/api/prompts", headers={"Authorization": "Bearer owner-token-for-tests"}
                      ).get_json()["prompts"][0]["prompt"] == "a moth"


# 14: credentials in feed URLs are used, never shown -------------------------------------------------

def test_feed_credentials_are_sent_to_the_feed_but_never_shown(tmp_path, server, store):
    from frame.daemon.http.app import create_app
    from frame.web import create_blueprint

    server.routes["/f?key=K3Y-VALUE"] = reply(GOOD)
    url = server.url("/f?key=K3Y-VALUE").replace("http://", "http://bob:hunter2@")
    broken = server.url("/missing?key=K3Y-VALUE").replace("http://", "http://bob:hunter2@")
    config = _config(tmp_path, FeedSource(url=url, format="json"), FeedSource(url=broken, format="json", name="b"))
    refresh_feeds(store, config, FeedFetcher(config.feeds, tmp_path / "feeds", attempts=1))
    assert server.last_headers["/f?key=K3Y-VALUE"]["Authorization"].startswith("Basic ")  # still used
    store.set_feed_health("old", url, False, 0, f"ConnectionError: ... with url: /f?key=K3Y-VALUE ({url})", False)

    client = create_app(config, store, token="owner-token-for-tests", state_dir=tmp_path,
                        pages=create_blueprint).test_client()
    for page in ("/api/status", "/status"):
        text = client.get(page, headers={"Authorization": "Bearer owner-token-for-tests"}).get_data(as_text=True)
        assert "127.0.0.1" in text and "key=***" in text
        assert "hunter2" not in text and "K3Y-VALUE" not in text and "bob" not in text
    cached = "".join(p.read_text() for p in (tmp_path / "feeds").glob("*.json"))
    assert "hunter2" not in cached and "K3Y-VALUE" not in cached
