"""Reliability with real processes: misbehaving feeds and damaged state must not stop the daemon."""

import pytest

from frame.daemon.store.database import Store
from frame.daemon.store.recovery import backup_path
from tests.daemon.conftest import add_picture
from tests.daemon.daemonproc import DaemonProcess, write_config
from tests.daemon.feedserver import FeedServer, drip, huge, reply
from tests.daemon.test_feeds import GOOD

BAD = {
    "/garbage": reply(b"\x00\xff{{{ not json", "application/json"),
    "/error": reply(b"oops", "text/plain", status=500),
    "/huge": huge(50 * 2**20, declare_length=False),
    "/drip": drip(interval=0.3, count=200),
    "/html": reply(b"<html>captive portal</html>", "text/html"),
    "/latin1": reply(b'{"prompts": ["caf\xe9 au lait"]}', "application/json"),
}


@pytest.fixture
def server():
    running = FeedServer()
    yield running
    running.close()


def test_daemon_keeps_running_on_bad_feeds_and_uses_cache(tmp_path, server):
    for path in BAD:
        server.routes[path] = reply(GOOD, headers={"ETag": '"v1"'})
    sources = [{"url": server.url(path), "format": "json", "name": path.strip("/")} for path in BAD]
    config, url = write_config(tmp_path, feeds={"sources": sources, "timeout_seconds": 1.0,
                                                "max_bytes": 1_000_000})
    daemon = DaemonProcess(config, url)
    try:
        daemon.wait_for(lambda: len([f for f in daemon.get("/api/status").json()["feeds"] if f["items"] == 2]) == 6)
    finally:
        daemon.terminate()
        daemon.kill()
    server.routes.update(BAD)
    daemon = DaemonProcess(config, url)
    try:
        def all_failed():
            feeds = daemon.get("/api/status").json()["feeds"]
            return feeds if all(f["last_error"] for f in feeds) else None

        feeds = daemon.wait_for(all_failed, timeout=40)
        assert len(feeds) == 6 and all(f["items"] == 2 and f["from_cache"] for f in feeds), feeds
        assert daemon.get("/api/pictures").status_code == 200  # still serving
    finally:
        code, _ = daemon.terminate()
        daemon.kill()
    assert code == 0


def test_corrupt_database_and_state_files_are_recovered(tmp_path):
    config, url = write_config(tmp_path)
    state = tmp_path / "state"
    store = Store.open(state)
    picture = add_picture(store, prompt="survives")
    store.backup(backup_path(store.path))
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    db = state / "frame.db"
    db.write_bytes(b"garbage" * 100 + db.read_bytes()[700:])
    feeds = state / "feeds"
    feeds.mkdir()
    (feeds / "0123456789abcdef01234567.json").write_text('{"sha256": "x", "data": {"trunc')
    (state / "token").write_text("")
    daemon = DaemonProcess(config, url)
    try:
        listing = daemon.get("/api/pictures").json()
        assert [p["id"] for p in listing["pictures"]] == [picture]
        assert daemon.get(f"/api/pictures/{picture}").json()["prompt"] == "survives"
    finally:
        daemon.terminate()
        daemon.kill()
    log = (tmp_path / "config.log").read_text()
    assert "is damaged" in log and "restored the store from its backup" in log
    assert list(state.glob("frame.db.corrupt-*"))


def test_feed_cache_file_damage_is_detected(tmp_path, server):
    from frame.config import FeedSource
    from frame.daemon.feeds.fetch import FeedFetcher, fetch_feed
    from tests.daemon.conftest import make_config

    server.routes["/f"] = reply(GOOD)
    source = FeedSource(url=server.url("/f"), format="json", name="f")
    cfg = make_config(tmp_path, feeds={"sources": (source,)})
    fetcher = FeedFetcher(cfg.feeds, tmp_path / "feeds", attempts=1)
    assert len(fetch_feed(fetcher, source, ())[0]) == 2
    cache = fetcher.cache_file(source.url)
    cache.write_text(cache.read_text()[:-20])
    server.routes["/f"] = reply(b"oops", "text/plain", status=404)
    items, error, from_cache = fetch_feed(fetcher, source, ())
    assert items == [] and "HTTP 404" in error and not from_cache
    assert not cache.exists() and list(cache.parent.glob("*.corrupt-*"))
