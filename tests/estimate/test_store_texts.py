"""``frame estimate`` reads tonight's texts from the store through ``Store`` methods, read-only.

The estimate counts the prompts tonight's choice embeds: the feed prompts valid now and the rated
painted pictures' prompts, and whether the taste model has enough ratings to choose. It used to run its
own SQL on frame.db; now the store's named methods answer, so a schema change finds these readers."""

from __future__ import annotations

import sqlite3

from frame.cli import estimate as estimate_cli
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from tests.daemon.conftest import add_picture, make_config


def _filled_store(tmp_path) -> None:
    store = Store.open(tmp_path)
    try:
        lighthouse = add_picture(store, prompt="a lighthouse, oil", origin="theme")
        add_picture(store, prompt="a harbour, ink", origin="theme")  # never rated
        fox = add_picture(store, prompt="a fox, watercolour", origin="queue")
        photo = gallery.publish_upload(store, tmp_path, b"jpeg bytes", ".jpg", caption="Grandma", width=4, height=3)
        for picture_id, value in ((lighthouse, 1), (lighthouse, -1), (fox, 1), (photo, 1)):
            store.rate(picture_id, "thumb", value)
        store.replace_feed_items("news", [{"prompt": "a snowy street"},
                                          {"prompt": "a spring meadow", "valid_from": "2999-01-01T00:00:00+00:00"},
                                          {"prompt": "last winter", "valid_until": "2000-01-01T00:00:00+00:00"}])
    finally:
        store.close()


def test_the_estimate_reads_ratings_feed_and_rated_prompts_from_the_store(tmp_path):
    _filled_store(tmp_path)
    config = make_config(tmp_path)
    facts = estimate_cli._store_facts(config)
    assert facts.ratings == 3  # pictures rated, the upload included; twice-rated counts once
    texts = estimate_cli._tonight(config, facts)
    assert "a snowy street" in texts.candidates
    assert not {"a spring meadow", "last winter"} & set(texts.candidates)  # not valid now
    assert texts.rated == ("a fox, watercolour", "a lighthouse, oil")  # an upload has no prompt to choose from


def test_the_estimate_never_creates_a_store(tmp_path):
    config = make_config(tmp_path / "none")
    facts = estimate_cli._store_facts(config)
    assert facts.ratings is None
    assert estimate_cli._tonight(config, facts).rated == ()
    assert not (tmp_path / "none").exists()


def test_an_unreadable_store_means_unknown(tmp_path):
    (tmp_path / "frame.db").write_bytes(b"not a database" * 100)
    config = make_config(tmp_path)
    facts = estimate_cli._store_facts(config)
    assert facts.ratings is None
    assert estimate_cli._tonight(config, facts).rated == ()


def test_the_store_answers_without_changing_anything(tmp_path):
    _filled_store(tmp_path)
    before = (tmp_path / "frame.db").read_bytes()
    store = Store.open_read_only(tmp_path)
    try:
        assert store.rated_picture_count() == 3
        assert store.rated_painted_prompts() == ["a fox, watercolour", "a lighthouse, oil"]
    finally:
        store.close()
    assert (tmp_path / "frame.db").read_bytes() == before
    assert sqlite3.connect(tmp_path / "frame.db").execute("PRAGMA integrity_check").fetchone()[0] == "ok"
