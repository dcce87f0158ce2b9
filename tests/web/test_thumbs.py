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
