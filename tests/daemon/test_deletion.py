"""Deleting a picture (``frame.daemon.deletion``, ``gallery.remove_picture``): the durability order, the
refusals, what the taste model keeps, ids that are never handed out again, and the API route."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from frame.daemon import deletion
from frame.daemon import queue as queue_rules
from frame.daemon.http.app import create_app
from frame.daemon.jobs.info import INFO_REASON
from frame.daemon.jobs.night import RenderContext, build_job, job_dir
from frame.daemon.store import gallery, migrations
from frame.daemon.store.database import Store
from frame.worker.records import RenderJob, Variation, write_job
from tests.daemon.conftest import add_picture, make_config

TOKEN = "owner-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _painted(store, tmp_path, stem: str, **fields) -> int:
    """A painted picture with its three gallery files (picture, panel image, explanation plot)."""
    folder = gallery.gallery_dir(tmp_path)
    folder.mkdir(exist_ok=True)
    names = {"file": f"{stem}.png", "panel_file": f"{stem}-panel.png"}
    for name in (*names.values(), f"{stem}-why.png"):
        (folder / name).write_bytes(b"x" * 50)
    why = {"plot": f"{stem}-why.png", "candidate": {"text": f"{stem}, oil", "theme": stem, "style": "oil"}}
    return add_picture(store, prompt=f"{stem}, oil", theme=stem, style="oil", origin="theme", why=why, bytes=150,
                       **names, **fields)


def _upload(store, tmp_path) -> int:
    return gallery.publish_upload(store, tmp_path, b"jpeg bytes", ".jpg", caption="Grandma", width=4, height=3)


def _files(tmp_path) -> list[str]:
    return sorted(p.name for p in gallery.gallery_dir(tmp_path).iterdir())


def _every_record_has_its_files(store, tmp_path) -> None:
    for picture in store.pictures(limit=100):
        for name in (picture.file, picture.panel_file, (picture.why or {}).get("plot")):
            if name:
                assert gallery.picture_path(tmp_path, name).is_file(), (picture.id, name)


# durability: the record first, then the files -------------------------------------------------------

def test_delete_removes_the_record_and_every_file(store, tmp_path):
    keep, gone = _painted(store, tmp_path, "lake"), _painted(store, tmp_path, "harbour")
    deletion.delete_picture(store, tmp_path, gone, {})
    assert store.picture(gone) is None and store.picture(keep) is not None
    assert _files(tmp_path) == ["lake-panel.png", "lake-why.png", "lake.png"]
    assert store.trashed_files() == []


def test_a_cut_before_the_record_is_deleted_leaves_the_picture_whole(store, tmp_path, monkeypatch):
    picture = _painted(store, tmp_path, "lake")

    def cut(picture_id, **options):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(store, "delete_picture", cut)
    with pytest.raises(KeyboardInterrupt):
        deletion.delete_picture(store, tmp_path, picture, {})
    assert store.picture(picture) is not None
    _every_record_has_its_files(store, tmp_path)


@pytest.mark.parametrize("kind", ["painted", "upload"])
def test_a_cut_between_record_and_files_leaves_no_dangling_record_and_the_files_are_swept_later(
        store, tmp_path, monkeypatch, kind):
    """An upload's file name has no render id, so only the trash written with the record finds it again
    (the render-id sweep that retention had would never remove it)."""
    picture = _painted(store, tmp_path, "lake") if kind == "painted" else _upload(store, tmp_path)
    other = _painted(store, tmp_path, "other")
    real_unlink = Path.unlink

    def cut(path, missing_ok=False):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(Path, "unlink", cut)
    with pytest.raises(KeyboardInterrupt):
        deletion.delete_picture(store, tmp_path, picture, {})
    monkeypatch.setattr(Path, "unlink", real_unlink)
    assert store.picture(picture) is None  # the record went first ...
    _every_record_has_its_files(store, tmp_path)  # ... so no record points at a missing file
    assert store.trashed_files()  # the leftovers are named
    gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=100, max_disk_mb=100))
    assert _files(tmp_path) == ["other-panel.png", "other-why.png", "other.png"]
    assert store.trashed_files() == [] and store.picture(other) is not None


def test_the_trash_never_removes_a_file_a_picture_still_uses(store, tmp_path):
    picture = _painted(store, tmp_path, "lake")
    store.execute("INSERT INTO gallery_trash (name, deleted_at) VALUES ('lake.png', 'x'), ('../frame.db', 'x')")
    gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=100, max_disk_mb=100))
    _every_record_has_its_files(store, tmp_path)
    assert (tmp_path / "frame.db").is_file() and store.picture(picture) is not None


# what may not be deleted now ------------------------------------------------------------------------

@pytest.mark.parametrize("reason", ["night", INFO_REASON])
def test_the_picture_on_the_panel_is_refused(store, tmp_path, reason):
    picture = _painted(store, tmp_path, "lake")
    store.record_shown(picture, reason)
    with pytest.raises(deletion.PictureInUse, match="Show another picture first"):
        deletion.delete_picture(store, tmp_path, picture, {})
    live = {"shown": {"picture_id": picture, "reason": "owner"}}
    other = _painted(store, tmp_path, "other")
    store.record_shown(other, "owner")  # the live status is newer than the history
    with pytest.raises(deletion.PictureInUse, match="on the frame now"):
        deletion.delete_picture(store, tmp_path, picture, live)
    assert store.picture(picture) is not None and len(_files(tmp_path)) == 6


def test_a_picture_a_render_is_varying_is_refused(store, tmp_path):
    picture = _painted(store, tmp_path, "lake")
    render_id = store.start_render("now", None)
    folder = job_dir(tmp_path, render_id)
    folder.mkdir(parents=True)
    write_job(folder, RenderJob(render_kind="now", render_id=render_id, state_dir=tmp_path, seed=1,
                                variation=Variation(image=gallery.picture_path(tmp_path, "lake.png"), strength=0.5,
                                                    picture_id=picture)))
    with pytest.raises(deletion.PictureInUse, match="painting a variation of picture"):
        deletion.delete_picture(store, tmp_path, picture, {})
    store.finish_render(render_id, "done")
    deletion.delete_picture(store, tmp_path, picture, {})
    assert store.picture(picture) is None


def test_an_unknown_picture_is_a_key_error(store, tmp_path):
    with pytest.raises(KeyError):
        deletion.delete_picture(store, tmp_path, 99, {})


# the taste model, the queue and ids ----------------------------------------------------------------

def _history(store, tmp_path):
    return build_job(RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path), 1, "night").history


def test_the_rating_of_a_deleted_painted_picture_stays_taste_input(store, tmp_path):
    """The store used to delete the ratings with the picture: deleting a disliked picture made the frame
    forget the dislike. The latest rating is kept; the deletion itself is not made a rating."""
    disliked, unrated, kept = (_painted(store, tmp_path, name) for name in ("storm", "fog", "lake"))
    store.rate(disliked, "stars", 4)
    store.rate(disliked, "thumb", -1)
    store.rate(kept, "stars", 5)
    before = _history(store, tmp_path)
    assert deletion.delete_picture(store, tmp_path, disliked, {}) is True
    assert deletion.delete_picture(store, tmp_path, unrated, {}) is False
    after = _history(store, tmp_path)
    assert after == before  # the same taste input, in the same order
    assert [(r.id, r.rating_kind, r.rating_value, r.candidate["theme"]) for r in after] == [
        (disliked, "thumb", -1, "storm"), (kept, "stars", 5, "lake")]


def test_an_uploads_rating_is_not_kept_and_retention_still_forgets(store, tmp_path):
    photo = _upload(store, tmp_path)
    store.rate(photo, "thumb", 1)
    assert deletion.delete_picture(store, tmp_path, photo, {}) is False
    old = _painted(store, tmp_path, "old")
    store.rate(old, "stars", 2)
    _painted(store, tmp_path, "new")
    assert gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=1, max_disk_mb=100)) == [old]
    assert store.remembered_ratings() == [] and _history(store, tmp_path) == ()


def test_ids_of_deleted_pictures_are_never_handed_out_again(store, tmp_path):
    """SQLite gives a new row max(id) + 1: deleting the newest picture would hand its id (the phone's
    cached image URLs, the display history, a queued variation) to the next picture."""
    first = _painted(store, tmp_path, "lake")
    newest = _painted(store, tmp_path, "storm")
    prompt_id, _ = queue_rules.queue_variation(make_config(tmp_path), store, tmp_path, store.picture(newest), 0.6)
    deletion.delete_picture(store, tmp_path, newest, {})
    later = _painted(store, tmp_path, "later")
    assert later > newest > first
    # the queued variation of the deleted picture stays queued and is skipped, never varying "later"
    job = build_job(RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path), 1, "night")
    assert job.variation is None and job.choice is None
    assert [q.id for q in store.queued_prompts()] == [prompt_id]


def test_the_migration_starts_ids_above_every_id_already_referenced(tmp_path):
    Store.open(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "frame.db")
    with conn:
        for table in ("gallery_trash", "taste_memory", "counters"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("INSERT INTO shown (picture_id, shown_at, reason) VALUES (41, 'x', 'night')")
        for column in ("failures", "set_aside"):  # added by the migration after this one (V5)
            conn.execute(f"ALTER TABLE prompts DROP COLUMN {column}")
        conn.execute(f"PRAGMA user_version = {migrations.MIGRATIONS.index(migrations._V4)}")
    conn.close()
    store = Store.open(tmp_path)
    try:
        assert add_picture(store) == 42
    finally:
        store.close()


# DELETE /api/pictures/<id> --------------------------------------------------------------------------

class _Controller:
    def __init__(self, shown: int | None = None) -> None:
        self.shown = shown

    def status(self):
        return {"state": "idle", "shown": {"picture_id": self.shown, "reason": "night"}, "render": None}


def test_api_delete(config, store, tmp_path):
    shown, picture = _painted(store, tmp_path, "lake"), _painted(store, tmp_path, "storm")
    store.rate(picture, "thumb", -1)
    client = create_app(config, store, token=TOKEN, controller=_Controller(shown), state_dir=tmp_path).test_client()
    assert client.delete(f"/api/pictures/{picture}").status_code == 401
    assert client.delete(f"/api/pictures/{picture}", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.delete("/api/pictures/999", headers=AUTH).status_code == 404
    on_panel = client.delete(f"/api/pictures/{shown}", headers=AUTH)
    assert on_panel.status_code == 409 and "Show another picture first" in on_panel.get_json()["error"]
    assert store.count_pictures() == 2
    answer = client.delete(f"/api/pictures/{picture}", headers=AUTH)
    assert answer.status_code == 200 and answer.get_json() == {"deleted": picture, "rating_kept": True}
    assert client.get(f"/api/pictures/{picture}", headers=AUTH).status_code == 404
    assert client.get("/api/pictures", headers=AUTH).get_json()["total"] == 1
    assert _files(tmp_path) == ["lake-panel.png", "lake-why.png", "lake.png"]
    assert client.delete(f"/api/pictures/{picture}", headers=AUTH).status_code == 404


# frame delete ID ------------------------------------------------------------------------------------

class _ApiClient:
    """The CLI's ``Client.request`` answered by the real API app (no socket)."""

    def __init__(self, app) -> None:
        self.http = app.test_client()

    def request(self, method, path, body=None):
        from frame.cli.client import BAD_REQUEST_STATUSES
        from frame.errors import FrameError, UsageError

        response = self.http.open(path, method=method, json=body, headers=AUTH)
        if response.status_code >= 400:
            error = UsageError if response.status_code in BAD_REQUEST_STATUSES else FrameError
            raise error(f"the daemon said: {response.get_json()['error']}")
        return response.get_json()


def _frame_delete(monkeypatch, app, tmp_path, *argv, tty=False, answer=""):
    import argparse

    from frame.cli import daemon as commands

    monkeypatch.setattr(commands, "_client", lambda config: _ApiClient(app))
    monkeypatch.setattr(commands, "_config", lambda args: None)
    monkeypatch.setattr("sys.stdin.isatty", lambda: tty)
    monkeypatch.setattr("builtins.input", lambda question: answer)
    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers())
    args = parser.parse_args(["delete", *argv])
    return args.func(args)


def test_frame_delete(config, store, tmp_path, monkeypatch, capsys):
    from frame.errors import FrameError, UsageError

    shown, picture = _painted(store, tmp_path, "lake"), _painted(store, tmp_path, "storm")
    store.rate(picture, "thumb", -1)
    app = create_app(config, store, token=TOKEN, controller=_Controller(shown), state_dir=tmp_path)
    with pytest.raises(UsageError, match="add --yes"):  # a script is never asked, and deletes nothing
        _frame_delete(monkeypatch, app, tmp_path, str(picture))
    assert _frame_delete(monkeypatch, app, tmp_path, str(picture), tty=True, answer="n") == 1
    assert store.picture(picture) is not None and capsys.readouterr().out == f"picture {picture} kept\n"
    with pytest.raises(FrameError, match="Show another picture first"):
        _frame_delete(monkeypatch, app, tmp_path, str(shown), "--yes")
    assert _frame_delete(monkeypatch, app, tmp_path, str(picture), tty=True, answer="y") == 0
    assert capsys.readouterr().out == (f"deleted picture {picture}; its rating stays: the frame keeps learning your "
                                       "taste from it\n")
    with pytest.raises(UsageError, match=f"no picture with id {picture}"):
        _frame_delete(monkeypatch, app, tmp_path, str(picture), "--yes")
