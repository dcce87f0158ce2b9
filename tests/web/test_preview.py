"""The picture page's panel preview: made by the real show worker, equal byte for byte to what the
virtual panel shows after "show on frame", cached on the card, redone when the display settings change."""

from __future__ import annotations

import dataclasses
import io
import threading

import pytest
from PIL import Image

from frame.config import Config, DisplayConfig, WebConfig
from frame.daemon.jobs import night
from frame.daemon.jobs import preview as previews
from frame.daemon.jobs.supervisor import Supervisor
from frame.daemon.store import gallery
from tests.web.conftest import TOKEN, logged_in, make_app
from tests.web.test_upload import jpeg, post_photo

SIZE = (200, 120)  # small: every preview and show here runs a real worker that dithers


def small_config(state_dir, **display) -> Config:
    return Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN),
                  display=DisplayConfig(size="x".join(map(str, SIZE)), **display))


@pytest.fixture
def config(state_dir):
    return small_config(state_dir)


@pytest.fixture
def owner(store, state_dir, pictures, controller, config):
    return logged_in(make_app(store, state_dir, controller, config=config))


@pytest.fixture
def worker_runs(monkeypatch):
    """How many workers the supervisor started (previews and shows alike)."""
    runs: list[str] = []
    original = Supervisor.run

    def counting(self, job_dir, **kwargs):
        runs.append(job_dir.name)
        return original(self, job_dir, **kwargs)

    monkeypatch.setattr(Supervisor, "run", counting)
    return runs


def shown_on_virtual_panel(config, store, state_dir, picture_id) -> bytes:
    """Show the picture as the daemon does (the show worker, virtual panel); the panel's PNG."""
    result = night.show_picture(night.RenderContext(config, store, state_dir), picture_id, "owner")
    assert result.status == "shown"
    return (state_dir / "display" / "panel.png").read_bytes()


def test_an_uploads_preview_is_what_the_virtual_panel_then_shows(owner, store, state_dir, config, worker_runs):
    assert post_photo(owner, jpeg(size=(300, 400), orientation=6)).status_code == 303
    [photo] = [p for p in store.pictures() if p.origin == "upload"]
    response = owner.get(f"/pictures/{photo.id}/preview.png")
    assert response.status_code == 200 and response.mimetype == "image/png"
    with Image.open(io.BytesIO(response.data)) as image:
        assert image.size == SIZE and image.mode == "RGB"
        assert len(image.getcolors(64)) <= 6  # only the panel's inks
    # the preview kept the prepared panel image in the gallery, like a painted picture's
    panel_file = store.picture(photo.id).panel_file
    assert panel_file and gallery.picture_path(state_dir, panel_file).is_file()
    assert shown_on_virtual_panel(config, store, state_dir, photo.id) == response.data


def test_a_painted_pictures_preview_is_its_stored_panel_image_or_a_fresh_one(owner, store, state_dir, pictures,
                                                                            config):
    """``new`` has a stored panel image that was not made for this panel (re-prepared, like a show
    does); ``old`` has one made for it (used as it is)."""
    from frame.display import get_panel, prepare

    stored = prepare(state_dir / "gallery" / "old.png", get_panel("virtual", "200x120", "spectra6"),
                     saturation=0.3, dither="atkinson")  # not what the settings would make now: must be kept
    stored.save(state_dir / "gallery" / "old-panel.png")
    store.execute("UPDATE pictures SET panel_file = 'old-panel.png' WHERE id = ?", (pictures["old"],))
    for name in ("new", "old"):
        preview = owner.get(f"/pictures/{pictures[name]}/preview.png")
        assert preview.status_code == 200
        assert shown_on_virtual_panel(config, store, state_dir, pictures[name]) == preview.data, name
    with Image.open(io.BytesIO(owner.get(f"/pictures/{pictures['old']}/preview.png").data)) as image:
        assert image.tobytes() == stored.convert("RGB").tobytes()
    assert store.picture(pictures["new"]).panel_file == "new-panel.png"  # a painted picture's stays


def test_the_preview_is_cached_and_redone_when_the_display_settings_change(store, state_dir, pictures, controller,
                                                                           worker_runs):
    picture = pictures["new"]
    first = logged_in(make_app(store, state_dir, controller, config=small_config(state_dir)))
    data = first.get(f"/pictures/{picture}/preview.png").data
    assert first.get(f"/pictures/{picture}/preview.png").data == data
    assert len(worker_runs) == 1
    cached = sorted(p.name for p in (state_dir / "previews").iterdir())
    assert len(cached) == 1 and cached[0].startswith(f"p{picture}-")

    other = logged_in(make_app(store, state_dir, controller, config=small_config(state_dir, saturation=0.2)))
    changed = other.get(f"/pictures/{picture}/preview.png").data
    assert changed != data and len(worker_runs) == 2
    assert len(list((state_dir / "previews").iterdir())) == 1, "the preview for the old settings is dropped"

    # the settings page replaces the running app's configuration: the next preview follows it
    other.application.extensions["frame.web"].config = small_config(state_dir, dither="atkinson")
    assert other.get(f"/pictures/{picture}/preview.png").data not in (data, changed)
    assert len(worker_runs) == 3


def test_preview_errors(owner, store, state_dir, pictures, monkeypatch):
    assert owner.get("/pictures/999/preview.png").status_code == 404
    monkeypatch.setattr(previews, "WAIT_SECONDS", 0.05)
    holder = threading.Thread(target=lambda: previews._WORKER.acquire() and None)
    holder.start()
    holder.join()
    try:
        response = owner.get(f"/pictures/{pictures['new']}/preview.png")
    finally:
        previews._WORKER.release()
    assert response.status_code == 503 and response.headers["Retry-After"] == "30"
    (state_dir / "gallery" / "new.png").unlink()  # a picture whose file is gone: 404, no crash
    (state_dir / "gallery" / "new-panel.png").unlink()
    assert owner.get(f"/pictures/{pictures['new']}/preview.png").status_code == 404


def test_the_picture_page_shows_the_preview_before_show_on_frame(owner, pictures, config):
    page = owner.get(f"/pictures/{pictures['old']}").get_data(as_text=True)
    assert page.index(f"/pictures/{pictures['old']}/preview.png") < page.index("Show this on the frame")
    assert "How the panel will show it: virtual panel, 200×120, spectra6 inks." in page


def test_the_caption_says_when_the_panel_image_is_turned(store, state_dir, pictures, controller):
    config = dataclasses.replace(small_config(state_dir), display=DisplayConfig(size="200x120", rotate=90))
    page = logged_in(make_app(store, state_dir, controller, config=config)).get(f"/pictures/{pictures['old']}")
    assert "stored turned 90° for the frame's mounting" in page.get_data(as_text=True)
