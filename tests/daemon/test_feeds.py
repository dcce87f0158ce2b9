import json
import time

import pytest

from frame.config import FeedSource
from frame.daemon.feeds.fetch import FeedFetcher, refresh_feeds
from frame.daemon.feeds.parse import FeedFormatError, Sanitiser, check_template, parse_feed
from tests.daemon.conftest import make_config
from tests.daemon.feedserver import FeedServer, drip, huge, reply

GOOD = json.dumps({"prompts": [
    "a red fox in snow",
    {"prompt": "a lighthouse", "theme": "sea", "negative_prompt": "people", "weight": 2,
     "valid_from": "2020-01-01T00:00:00Z", "valid_until": "2999-01-01T00:00:00Z"}]}).encode()
RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>
<item><title>Comet seen over &lt;b&gt;Lisbon&lt;/b&gt;</title></item>
<item><title>Harvest festival opens</title></item></channel></rss>"""


@pytest.fixture
def server():
    running = FeedServer()
    yield running
    running.close()


def _setup(tmp_path, server, path, fmt="json", **feeds):
    source = FeedSource(url=server.url(path), format=fmt, name="test", template="{title}, {style}")
    config = make_config(tmp_path, feeds={"sources": (source,), "timeout_seconds": 1.0, **feeds},
                         taste={"styles": ("linocut print",)})
    fetcher = FeedFetcher(config.feeds, tmp_path / "feeds", backoff=0.01)
    return config, fetcher


def _prompts(store):
    return sorted(i["prompt"] for i in store.feed_items())


def test_json_feed_then_conditional_304(tmp_path, server, store):
    server.routes["/f"] = reply(GOOD, headers={"ETag": '"v1"', "Last-Modified": "Sun, 29 Nov 2026 10:00:00 GMT"})
    config, fetcher = _setup(tmp_path, server, "/f")
    assert refresh_feeds(store, config, fetcher) == {"test": 2}
    item = next(i for i in store.feed_items() if i["prompt"] == "a lighthouse")
    assert (item["theme"], item["negative_prompt"], item["weight"]) == ("sea", "people", 2.0)
    server.routes["/f"] = reply(b"", status=304)
    assert refresh_feeds(store, config, fetcher) == {"test": 2}
    assert server.last_headers["/f"]["If-None-Match"] == '"v1"'
    assert server.last_headers["/f"]["If-Modified-Since"].startswith("Sun, 29 Nov")
    assert store.feed_health()[0].last_error is None


def test_text_and_rss_feeds(tmp_path, server, store):
    server.routes["/t"] = reply(b"# comment\n\na quiet harbour\n  a koi pond \n", "text/plain; charset=utf-8")
    config, fetcher = _setup(tmp_path, server, "/t", fmt="text")
    refresh_feeds(store, config, fetcher)
    assert _prompts(store) == ["a koi pond", "a quiet harbour"]
    server.routes["/r"] = reply(RSS, "application/rss+xml")
    config, fetcher = _setup(tmp_path, server, "/r", fmt="rss")
    refresh_feeds(store, config, fetcher)
    assert _prompts(store) == ["Comet seen over Lisbon, linocut print", "Harvest festival opens, linocut print"]


BAD_ROUTES = {
    "garbage": reply(b"\x00\x01{{{not json", "application/json"),
    "500": reply(b"oops", "text/plain", status=500),
    "wrong type": reply(b"<html>login</html>", "text/html"),
    "invalid utf-8": reply(b'{"prompts": ["caf\xe9"]}', "application/json"),
    "50 MB declared": huge(50 * 2**20, declare_length=True),
    "50 MB streamed": huge(50 * 2**20, declare_length=False),
    "not a feed": reply(b'{"items": []}'),
}


@pytest.mark.parametrize("case", sorted(BAD_ROUTES))
def test_failing_feed_keeps_last_good_copy(tmp_path, server, store, case):
    server.routes["/f"] = reply(GOOD, headers={"ETag": '"v1"'})
    config, fetcher = _setup(tmp_path, server, "/f", max_bytes=100_000)
    refresh_feeds(store, config, fetcher)
    server.routes["/f"] = BAD_ROUTES[case]
    assert refresh_feeds(store, config, fetcher) == {"test": 2}
    assert _prompts(store) == ["a lighthouse", "a red fox in snow"]
    health = store.feed_health()[0]
    assert health.last_error and health.from_cache == 1 and health.last_ok_at


def test_500_is_retried_with_backoff(tmp_path, server, store):
    server.routes["/f"] = reply(b"oops", "text/plain", status=503)
    config, fetcher = _setup(tmp_path, server, "/f")
    sleeps = []
    fetcher.sleep = sleeps.append
    assert refresh_feeds(store, config, fetcher) == {"test": 0}
    assert server.hits["/f"] == 3 and sleeps == [0.01, 0.02]
    assert "HTTP 503" in store.feed_health()[0].last_error


def test_slow_drip_is_cut_off(tmp_path, server, store):
    server.routes["/f"] = drip(interval=0.2, count=100)
    config, fetcher = _setup(tmp_path, server, "/f", fmt="text", timeout_seconds=0.5)
    fetcher.attempts = 1
    started = time.monotonic()
    refresh_feeds(store, config, fetcher)
    assert time.monotonic() - started < 3
    assert "slow server" in store.feed_health()[0].last_error


def test_unreachable_feed_without_cache(tmp_path, store):
    source = FeedSource(url="http://127.0.0.1:9/none", format="json", name="dead")
    config = make_config(tmp_path, feeds={"sources": (source,), "timeout_seconds": 0.5})
    fetcher = FeedFetcher(config.feeds, tmp_path / "feeds", attempts=1)
    assert refresh_feeds(store, config, fetcher) == {"dead": 0}
    assert "ConnectionError" in store.feed_health()[0].last_error


def test_cache_file_name_never_contains_feed_text(tmp_path, server):
    config, fetcher = _setup(tmp_path, server, "/../../etc/passwd;rm -rf")
    name = fetcher.cache_file(config.feeds.sources[0].url).name
    assert name.endswith(".json") and all(c in "0123456789abcdef.json" for c in name)


def test_sanitiser_controls_length_and_blocklist():
    clean = Sanitiser(max_chars=20, blocklist=("Gore",))
    assert clean.clean("a\x00b\u202ec\r\nd\te") == "a b c d e"
    assert clean.clean("one two three four five six") == "one two three four"
    assert clean.clean(42) == ""
    assert clean.blocked("lots of GORE here") == "Gore"
    body = json.dumps({"prompts": ["fine prompt", "gore fest", "fine prompt", "\x07"]}).encode()
    items = parse_feed(body, "json", theme="", template="{title}", styles=(), sanitiser=clean)
    assert [i["prompt"] for i in items] == ["fine prompt"]


def test_json_schema_errors():
    clean = Sanitiser(max_chars=100)
    bad = json.dumps({"prompts": [{"prompt": "x", "weight": "heavy"}, {"prompt": 3}]}).encode()
    with pytest.raises(FeedFormatError, match="none of the 2"):
        parse_feed(bad, "json", theme="", template="", styles=(), sanitiser=clean)
    mixed = json.dumps({"prompts": [{"prompt": "ok", "valid_until": "tomorrow"}, "fine"]}).encode()
    assert [i["prompt"] for i in parse_feed(mixed, "json", theme="", template="", styles=(), sanitiser=clean)] \
        == ["fine"]


def test_template_fields_are_restricted():
    check_template("{title} in the style of {style}")
    for bad in ("{title.__class__}", "{os}", "{title!r}", "{title:>10}"):
        with pytest.raises(FeedFormatError):
            check_template(bad)


def test_combined_weight_stays_finite(tmp_path, server, store):
    """The feed's weight times each item's: a source weight that slipped past the settings check
    (1e308) times an item's 100 was inf, which broke every night's choice."""
    server.routes["/f"] = reply(json.dumps({"prompts": [{"prompt": "heavy", "weight": 100}]}).encode())
    source = FeedSource(url=server.url("/f"), format="json", name="test", template="{title}", weight=1e308)
    config = make_config(tmp_path, feeds={"sources": (source,), "timeout_seconds": 1.0})
    refresh_feeds(store, config, FeedFetcher(config.feeds, tmp_path / "feeds", backoff=0.01))
    weight = store.feed_items()[0]["weight"]
    assert weight == 100 * 100
