"""The phone pages in a real headless browser (Debian's chromium driven by Playwright, no downloads):
a photo uploaded, shown on the virtual panel and deleted; a photo too large.

Starts the daemon's real app (waitress on 127.0.0.1, ephemeral port, temp state dir, real store seeded
with pictures) and checks what is stored behind what the page shows. Screenshots at a phone viewport go
to ``test-artifacts/web/``. Setup: ``tests/web/browser.py`` and the browser fixtures in ``conftest.py``.
"""

from __future__ import annotations

import pytest

from tests.web.browser import SHOW_TIMEOUT_MS, log_in, no_horizontal_overflow, serve, shot, sync_api
from tests.web.conftest import TOKEN, FakeController, make_app


class PanelController(FakeController):
    """The daemon's show path for real: "show on frame" runs the show worker on the virtual panel."""

    def __init__(self, store, state_dir) -> None:
        super().__init__()
        from frame.config import Config, WebConfig
        from frame.daemon.jobs.night import RenderContext

        self.config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN))
        self.ctx = RenderContext(self.config, store, state_dir)

    def show(self, picture_id: int) -> dict:
        from frame.daemon.jobs.night import show_picture

        super().show(picture_id)
        show_picture(self.ctx, picture_id, "owner")
        return {"picture_id": picture_id}


@pytest.fixture
def panel_server(store, state_dir, pictures):
    controller = PanelController(store, state_dir)
    yield from serve(make_app(store, state_dir, controller, config=controller.config))

def test_owner_uploads_a_photo_shows_it_and_the_virtual_panel_shows_the_preview(panel_server, page, store,
                                                                                 state_dir, tmp_path):
    """A phone photo (stored sideways, EXIF says turn it) goes up through the form, its picture page
    shows the panel preview, "show on frame" puts it on the virtual panel: the panel's PNG is the
    preview, byte for byte. Then it is deleted again: refused while on the panel, gone after another
    picture was shown."""
    from tests.web.test_upload import jpeg

    expect = sync_api.expect
    photo = tmp_path / "IMG_0042.jpg"
    photo.write_bytes(jpeg(size=(900, 600), orientation=6))
    page.goto(panel_server + "/login?next=/gallery")
    page.get_by_label("Owner token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Add a photo").click()
    page.get_by_label("Photo", exact=True).set_input_files(str(photo))
    page.get_by_label("Caption (optional)").fill("The garden in May")
    shot(page, "12-upload")
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("status")).to_contain_text("Photo added to the gallery")
    expect(page.locator("q.prompt")).to_have_text("The garden in May")
    [uploaded] = [p for p in store.pictures() if p.origin == "upload"]
    assert page.url.endswith(f"/pictures/{uploaded.id}")

    preview = page.get_by_alt_text(f"What the panel will show: picture {uploaded.id} dithered to the panel's inks")
    assert preview.evaluate("img => img.decode().then(() => img.naturalWidth)") == 800
    expect(page.locator(".panel-preview figcaption")).to_contain_text("virtual panel, 800×480, spectra6 inks")
    shot(page, "13-upload-preview")
    served = page.request.get(panel_server + f"/pictures/{uploaded.id}/preview.png").body()

    # The show runs a real show worker before the page answers: 13 s seen on a loaded 2-core machine.
    page.get_by_role("button", name="Show this on the frame").click(timeout=SHOW_TIMEOUT_MS)
    expect(page.get_by_role("status")).to_contain_text("Sent to the frame", timeout=SHOW_TIMEOUT_MS)
    assert store.last_shown().picture_id == uploaded.id
    assert (state_dir / "display" / "panel.png").read_bytes() == served
    page.get_by_role("link", name="Gallery").click()
    expect(page.locator(".grid li")).to_have_count(3)
    shot(page, "14-gallery-with-upload")

    # a wrong upload is deleted again: refused while on the panel, gone once another picture is shown
    page.goto(panel_server + f"/pictures/{uploaded.id}")
    page.get_by_role("link", name="Delete this picture…").click()
    expect(page.get_by_role("alert")).to_contain_text("is on the frame now. Show another picture first")
    expect(page.get_by_role("button", name=f"Delete picture {uploaded.id}")).to_have_count(0)
    no_horizontal_overflow(page)
    other = next(p.id for p in store.pictures() if p.origin != "upload")
    page.goto(panel_server + f"/pictures/{other}")
    # The show runs a real show worker before the page answers: 13 s seen on a loaded 2-core machine.
    page.get_by_role("button", name="Show this on the frame").click(timeout=SHOW_TIMEOUT_MS)
    expect(page.get_by_role("status")).to_contain_text("Sent to the frame", timeout=SHOW_TIMEOUT_MS)
    page.goto(panel_server + f"/pictures/{uploaded.id}")
    page.get_by_role("link", name="Delete this picture…").click()
    expect(page.locator("main")).to_contain_text("The frame has no other copy")
    shot(page, "15-delete-confirm")
    page.get_by_role("button", name=f"Delete picture {uploaded.id}").click()
    expect(page.get_by_role("status")).to_contain_text(f"Picture {uploaded.id} deleted.")
    expect(page.locator(".grid li")).to_have_count(2)
    assert store.picture(uploaded.id) is None
    assert not [f for f in (state_dir / "gallery").iterdir() if "-upload-" in f.name]


def test_a_photo_over_20_mb_gets_a_styled_page_with_the_limit_and_a_way_back(server, page, store, tmp_path):
    """Issue 29 item 14: the server refuses the body from its headers, and answered with waitress's bare
    text ("Request Entity Too Large / exceeds max_body of 65537"), ~980 px wide on a phone."""
    expect = sync_api.expect
    big = tmp_path / "IMG_0100.jpg"
    with big.open("wb") as out:
        out.truncate(21 * 1024 * 1024)  # sparse: 22 MB on the wire, nothing much on disk
    log_in(page, server, "/upload")
    page.get_by_label("Photo", exact=True).set_input_files(str(big))
    page.get_by_role("button", name="Upload").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The photo is too large: the frame takes photos of at most 20 MB "
                                  "(this one is 22.0 MB)")
    assert "max_body" not in page.content()
    assert page.locator("header.top").is_visible()  # the pages' own layout and style sheet
    no_horizontal_overflow(page)
    shot(page, "16-upload-too-large")
    page.get_by_role("link", name="Back to the upload form").click()
    expect(page.get_by_label("Photo", exact=True)).to_be_visible()
    assert [p for p in store.pictures() if p.origin == "upload"] == []


