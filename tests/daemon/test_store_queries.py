"""The questions the daemon asks of its database, each a named ``Store`` method (issue 43 item 4):
what the night's jobs, the fallback, the buttons, deletion and the thumbnails read."""

from __future__ import annotations

from frame.daemon.store.database import Store
from tests.daemon.conftest import add_picture


def test_picture_ids_are_every_picture_oldest_first_and_newer_ones_are_counted(store: Store) -> None:
    assert store.picture_ids() == []
    first, second, third = (add_picture(store, f"p{i}") for i in range(3))
    store.delete_picture(second, remember_rating=False)
    assert store.picture_ids() == [first, third]
    assert store.count_newer_pictures(first) == 1
    assert store.count_newer_pictures(third) == 0
    assert store.count_newer_pictures(second) == 1  # a deleted id still has its place


def test_a_night_render_counts_as_started_whatever_its_status_but_only_for_its_night(store: Store) -> None:
    assert not store.night_render_started("2026-12-06")
    store.start_render("now", "2026-12-06")
    assert not store.night_render_started("2026-12-06")  # only the night's own render
    rid = store.start_render("night", "2026-12-06")
    assert store.night_render_started("2026-12-06") and not store.night_render_started("2026-12-07")
    store.finish_render(rid, "failed", error="out of memory")
    assert store.night_render_started("2026-12-06")


def test_the_night_picture_is_the_latest_finished_render_that_made_one(store: Store) -> None:
    assert store.night_picture("2026-12-06") is None
    done = store.start_render("night", "2026-12-06")
    store.finish_render(done, "done", picture_id=4)
    failed = store.start_render("night", "2026-12-06")
    store.finish_render(failed, "failed", picture_id=9)
    store.start_render("night", "2026-12-06")  # still running
    assert store.night_picture("2026-12-06") == 4
    again = store.start_render("now", "2026-12-06")
    store.finish_render(again, "done", picture_id=5)
    assert store.night_picture("2026-12-06") == 5 and store.night_picture("2026-12-07") is None


def test_least_recently_shown_prefers_never_shown_then_the_oldest_showing(store: Store) -> None:
    a, b, c = (add_picture(store, f"p{i}") for i in range(3))
    assert store.least_recently_shown([]) is None
    assert store.least_recently_shown([999]) is None
    assert store.least_recently_shown([a, b, c]) == a  # none shown: the lowest id
    store.record_shown(a, "night")
    store.record_shown(b, "night")
    assert store.least_recently_shown([a, b, c]) == c
    store.record_shown(c, "night")
    store.record_shown(a, "rotation")
    assert store.least_recently_shown([a, b, c]) == b  # a's latest showing is the newest
    assert store.least_recently_shown([a, c]) == c


def test_a_deleted_pictures_rating_is_remembered_only_when_the_owner_deleted_it(store: Store) -> None:
    kept, forgotten = add_picture(store, "kept"), add_picture(store, "forgotten")
    store.rate(kept, "stars", 5)
    store.rate(forgotten, "stars", 5)
    store.delete_picture(kept, remember_rating=True)
    store.delete_picture(forgotten, remember_rating=False)
    assert store.rating_remembered(kept) and not store.rating_remembered(forgotten)
