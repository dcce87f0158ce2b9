import dataclasses
import sqlite3

import pytest

from frame.daemon.store import migrations
from frame.daemon.store.database import Store
from frame.daemon.store.records import RenderRow, ShownEvent, StoredPicture
from frame.errors import FrameError
from tests.daemon.conftest import add_picture


def test_fresh_store_is_wal_and_current_schema(store):
    assert store.query("PRAGMA journal_mode")[0][0] == "wal"
    assert store.query("PRAGMA user_version")[0][0] == migrations.SCHEMA_VERSION


def test_migrates_an_old_database_step_by_step(tmp_path):
    conn = sqlite3.connect(tmp_path / "frame.db", isolation_level=None)
    for statement in migrations.MIGRATIONS[0].split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO pictures (created_at, file, prompt) VALUES ('t', 'a.png', 'kept')")
    conn.close()
    opened = Store.open(tmp_path)
    assert opened.query("PRAGMA user_version")[0][0] == migrations.SCHEMA_VERSION
    assert opened.picture(1).prompt == "kept"
    assert opened.feed_health() == []  # table from migration 2 exists
    opened.close()


def test_refuses_a_newer_schema(tmp_path):
    conn = sqlite3.connect(tmp_path / "frame.db")
    conn.execute(f"PRAGMA user_version = {migrations.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(FrameError, match="schema version"):
        Store.open(tmp_path)


def test_picture_round_trip_with_json_columns(store):
    pid = add_picture(store, why={"sentence": "you liked harbours"}, features={"warm": 0.5},
                      timings={"generate": 3.2}, theme="harbour", style="watercolor")
    picture = store.picture(pid)
    assert picture.why == {"sentence": "you liked harbours"}
    assert picture.features == {"warm": 0.5}
    assert picture.theme == "harbour" and picture.favourite is False
    assert store.picture(pid + 100) is None
    with pytest.raises(ValueError, match="unknown picture fields"):
        store.add_picture(file="a", prompt="p", colour="red")


@pytest.mark.parametrize(("kind", "value", "favourite"), [
    ("thumb", 1, True), ("thumb", -1, False), ("stars", 4, True), ("stars", 5, True), ("stars", 3, False)])
def test_favourite_is_like_or_four_stars(store, kind, value, favourite):
    pid = add_picture(store)
    store.rate(pid, kind, value)
    assert store.picture(pid).favourite is favourite
    assert (store.favourite_ids() == [pid]) is favourite


def test_latest_rating_wins(store):
    pid = add_picture(store)
    store.rate(pid, "thumb", 1)
    store.rate(pid, "stars", 2)
    picture = store.picture(pid)
    assert (picture.rating_kind, picture.rating_value, picture.favourite) == ("stars", 2, False)
    assert [p.id for p in store.rating_history()] == [pid]


def test_rating_validation_and_unknown_picture(store):
    pid = add_picture(store)
    for kind, value in (("thumb", 2), ("stars", 0), ("stars", 6), ("heart", 1)):
        with pytest.raises(ValueError):
            store.rate(pid, kind, value)
    with pytest.raises(KeyError):
        store.rate(pid + 1, "thumb", 1)
    assert store.query("SELECT COUNT(*) FROM ratings")[0][0] == 0


def test_prompt_queue(store):
    first = store.queue_prompt("a red fox", theme="animals")
    store.queue_prompt("a blue whale")
    assert [p.prompt for p in store.queued_prompts()] == ["a red fox", "a blue whale"]
    store.mark_prompt_used(first, picture_id=7)
    assert [p.prompt for p in store.queued_prompts()] == ["a blue whale"]


def test_feed_items_validity_and_used_order(store):
    store.replace_feed_items("news", [
        {"prompt": "old", "valid_until": "2000-01-01T00:00:00+00:00"},
        {"prompt": "future", "valid_from": "2999-01-01T00:00:00+00:00"},
        {"prompt": "a"}, {"prompt": "b"}])
    items = store.feed_items()
    assert [i["prompt"] for i in items] == ["a", "b"]
    store.mark_feed_item_used(items[0]["id"])
    assert [i["prompt"] for i in store.feed_items()] == ["b", "a"]
    store.replace_feed_items("news", [{"prompt": "a"}, {"prompt": "c"}])  # 'a' keeps its used_at
    assert [i["prompt"] for i in store.feed_items()] == ["c", "a"]


def test_render_history(store):
    rid = store.start_render("night", "2026-11-29")
    assert store.unfinished_renders()[0].id == rid
    assert not store.night_done("2026-11-29")
    assert store.count_restart(rid) == 1
    store.finish_render(rid, "done", picture_id=3, timings={"total": 1.0})
    assert store.night_done("2026-11-29") and store.unfinished_renders() == []
    assert store.render(rid).picture_id == 3


def test_readers_return_typed_records_whose_json_is_the_row(store):
    """Readers hand out frozen records; ``to_json`` is the row as ``frame status --json`` printed it."""
    rid = store.start_render("now", None)
    store.finish_render(rid, "failed", error="boom", timings={"total": 2.5})
    pid = add_picture(store, theme="harbour")
    store.record_shown(pid, "rotation")
    render, shown, picture = store.render(rid), store.last_shown(), store.picture(pid)
    assert isinstance(render, RenderRow) and isinstance(shown, ShownEvent) and isinstance(picture, StoredPicture)
    assert render.timings == {"total": 2.5} and (render.kind, render.status, render.error) == ("now", "failed", "boom")
    assert render.to_json() == dict(store.query("SELECT * FROM renders WHERE id = ?", (rid,))[0])
    assert shown.to_json() == dict(store.query("SELECT * FROM shown")[0])
    assert [p.theme for p in store.pictures()] == ["harbour"] and store.renders(1) == [render]
    with pytest.raises(dataclasses.FrozenInstanceError):
        picture.theme = "other"


def test_transaction_rolls_back(store):
    with pytest.raises(RuntimeError):
        with store.transaction() as conn:
            conn.execute("INSERT INTO prompts (prompt, created_at) VALUES ('x', 't')")
            raise RuntimeError("boom")
    assert store.queued_prompts() == []
