"""Deleting from the phone: the picture page's "Delete", the confirmation step (plain forms, no
JavaScript), the owner session and CSRF, and the picture on the panel refused."""

from __future__ import annotations

import re

from frame.daemon.store import gallery
from tests.web.conftest import csrf_from
from tests.web.test_upload import jpeg, post_photo, uploads


def _gallery_files(state_dir) -> list[str]:
    return sorted(p.name for p in gallery.gallery_dir(state_dir).iterdir())


def _confirm(owner, picture_id):
    page = owner.get(f"/pictures/{picture_id}/delete")
    assert page.status_code == 200
    return page.get_data(as_text=True)


def test_delete_through_the_confirmation_page(owner, store, state_dir, pictures):
    old = pictures["old"]
    picture_page = owner.get(f"/pictures/{old}").get_data(as_text=True)
    assert f'href="/pictures/{old}/delete"' in picture_page  # a link to the confirmation, not a form
    assert f'action="/pictures/{old}/delete"' not in picture_page
    html = _confirm(owner, old)
    assert f"Delete picture {old}?" in html and "Your rating (liked) stays" in html
    assert f'action="/pictures/{old}/delete"' in html
    assert store.picture(old) is not None  # looking at the confirmation deletes nothing
    response = owner.post(f"/pictures/{old}/delete", data={"csrf_token": csrf_from(html)})
    assert response.status_code == 303 and response.headers["Location"] == "/gallery"
    gallery_page = owner.get("/gallery").get_data(as_text=True)
    assert f"Picture {old} deleted." in gallery_page and f'href="/pictures/{old}"' not in gallery_page
    assert store.count_pictures() == 1
    for path in (f"/pictures/{old}", f"/pictures/{old}/image", f"/pictures/{old}/thumb", f"/pictures/{old}/delete"):
        assert owner.get(path).status_code == 404, path
    assert "old.png" not in _gallery_files(state_dir)
    assert owner.post(f"/pictures/{old}/delete", data={"csrf_token": csrf_from(html)}).status_code == 404


def test_deleting_needs_the_owner_and_the_csrf_token(client, owner, store, pictures):
    old = pictures["old"]
    anonymous = client.application.test_client()
    assert anonymous.get(f"/pictures/{old}/delete").headers["Location"].startswith("/login?next=")
    assert anonymous.post(f"/pictures/{old}/delete", data={}).status_code == 401
    assert owner.post(f"/pictures/{old}/delete", data={}).status_code == 400
    assert owner.post(f"/pictures/{old}/delete", data={"csrf_token": "forged"}).status_code == 403
    assert store.picture(old) is not None


def test_the_picture_on_the_panel_is_refused_with_what_to_do(owner, store, state_dir, pictures):
    shown = pictures["new"]  # the seed shows it
    home = owner.get("/").get_data(as_text=True)
    assert "/delete" not in home  # nothing to delete on the "Now showing" page
    html = _confirm(owner, shown)
    assert "is on the frame now. Show another picture first" in html
    assert f'action="/pictures/{shown}/delete"' not in html
    response = owner.post(f"/pictures/{shown}/delete", data={"csrf_token": csrf_from(html)})
    assert response.status_code == 409 and "Show another picture first" in response.get_data(as_text=True)
    assert store.picture(shown) is not None and "new.png" in _gallery_files(state_dir)


def test_an_uploaded_photo_can_be_deleted_with_its_panel_image(owner, store, state_dir, pictures):
    assert post_photo(owner, jpeg((120, 80)), caption="Grandma").status_code == 303
    photo = uploads(store)[0]
    assert owner.get(f"/pictures/{photo.id}/preview.png").status_code == 200  # keeps a panel image beside it
    photo = store.picture(photo.id)
    assert photo.panel_file in _gallery_files(state_dir)
    html = _confirm(owner, photo.id)
    assert "The frame has no other copy" in html
    owner.post(f"/pictures/{photo.id}/delete", data={"csrf_token": csrf_from(html)})
    assert uploads(store) == [] and store.count_pictures() == 2
    assert not [name for name in _gallery_files(state_dir) if re.search(r"-upload-", name)]


def test_the_confirmation_names_queued_variations_that_will_be_skipped(owner, store, pictures):
    store.queue_prompt("again", source_picture_id=pictures["old"], strength=0.6)
    assert '1 queued "more like this" of it will be skipped' in _confirm(owner, pictures["old"])
