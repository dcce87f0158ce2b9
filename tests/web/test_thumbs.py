"""Gallery thumbnails (issue 27): made by the image child, one child for a page's tiles, kept on the
SD card and gone with their picture."""

from __future__ import annotations

import io

from PIL import Image

from frame.daemon.store import gallery, thumbs
from tests.web.conftest import write_png


def test_one_request_makes_the_pages_missing_thumbnails_on_disk(owner, store, state_dir, pictures):
    for i in range(5):
        write_png(state_dir / "gallery" / f"extra-{i}.png", (10 * i, 90, 160), (640, 400))
        store.add_picture(file=f"extra-{i}.png", prompt=f"extra {i}", theme="t", style="s", seed=i)
    answer = owner.get(f"/pictures/{pictures['old']}/thumb")
    assert answer.status_code == 200 and answer.mimetype == "image/jpeg"
    assert Image.open(io.BytesIO(answer.data)).size == (360, 216)
    made = sorted(p.name for p in thumbs.thumb_dir(state_dir).iterdir())
    assert made == sorted(f"{p.file}.jpg" for p in store.pictures(limit=100))  # all 7, by one child
    served = owner.get(f"/pictures/{pictures['new']}/thumb").data
    assert served == (thumbs.thumb_dir(state_dir) / "new.png.jpg").read_bytes()


def test_a_deleted_pictures_thumbnail_goes_with_it(owner, store, state_dir, pictures):
    assert owner.get(f"/pictures/{pictures['old']}/thumb").status_code == 200
    kept = thumbs.thumb_path(state_dir, "old.png")
    assert kept.is_file()
    gallery.remove_picture(store, state_dir, pictures["old"])
    assert not kept.exists() and thumbs.thumb_path(state_dir, "new.png").is_file()
    assert owner.get(f"/pictures/{pictures['old']}/thumb").status_code == 404


def test_after_a_restart_the_tiles_have_their_thumbnails_at_once(owner, store, state_dir, pictures, monkeypatch):
    """Issue 29 item 18: the thumbnails live on the SD card, so a new app over the same state folder (the
    daemon restarted) serves every tile's thumbnail without making any."""
    from frame.web import images
    from tests.web.conftest import login, make_app

    gallery_page = owner.get("/gallery").get_data(as_text=True)
    ids = [pictures["old"], pictures["new"]]
    for picture_id in ids:
        assert f"/pictures/{picture_id}/thumb" in gallery_page
        assert owner.get(f"/pictures/{picture_id}/thumb").status_code == 200
    made = {picture_id: owner.get(f"/pictures/{picture_id}/thumb").data for picture_id in ids}

    def no_child(*args, **kwargs):
        raise AssertionError("a thumbnail was made again after the restart")

    monkeypatch.setattr(images, "run_child", no_child)
    store.close()
    restarted_store = store.__class__.open(state_dir)
    try:
        client = make_app(restarted_store, state_dir).test_client()
        assert login(client).status_code == 303
        for picture_id in ids:
            answer = client.get(f"/pictures/{picture_id}/thumb")
            assert answer.status_code == 200 and answer.mimetype == "image/jpeg"
            assert answer.data == made[picture_id]
    finally:
        restarted_store.close()


def test_a_tile_whose_thumbnail_cannot_be_made_now_shows_the_picture(owner, state_dir, pictures, monkeypatch):
    """Issue 29 item 18: while the image child is busy (a restart's first gallery view of many new
    pictures, an upload) or failing, the tile got 503 or 404 and stayed blank: an <img> never asks
    again. It now gets the full picture, uncached, so a later view has its thumbnail."""
    from frame.daemon.jobs.children import ChildBusy, ChildFailed
    from frame.web import images

    for error in (ChildBusy("the frame is busy with another picture"), ChildFailed("the thumbs job failed")):
        def failing(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(images, "run_child", failing)
        answer = owner.get(f"/pictures/{pictures['old']}/thumb", follow_redirects=True)
        assert answer.status_code == 200 and answer.mimetype == "image/png"
        assert answer.data == (state_dir / "gallery" / "old.png").read_bytes()
        first = owner.get(f"/pictures/{pictures['old']}/thumb")
        assert first.headers["Cache-Control"] == "no-store"
    assert not thumbs.thumb_path(state_dir, "old.png").exists()
    monkeypatch.undo()
    answer = owner.get(f"/pictures/{pictures['old']}/thumb")
    assert answer.status_code == 200 and answer.mimetype == "image/jpeg"
