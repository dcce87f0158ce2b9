"""Issue 40 item 16, in chromium at 390 px: "paint it now" where the owner is — beside "Reuse seed",
"More like this" and each queued prompt — not only on the Status page."""

from __future__ import annotations

from frame.daemon.http.contract import Busy
from tests.web.browser import log_in, no_horizontal_overflow, serve, shot, sync_api
from tests.web.conftest import FakeController, make_app


class BusyAfterOne(FakeController):
    """A daemon whose render, once started, runs until the test ends."""

    def render_now(self) -> dict:
        if self.renders:
            raise Busy("a render is already running")
        return super().render_now()


def test_paint_it_now_from_a_queued_prompt_and_from_a_picture(store, state_dir, pictures, page):
    expect = sync_api.expect
    controller = BusyAfterOne()
    ids = [store.queue_prompt(text) for text in ("a fox in snow", "a whale at dusk", "a heron in reeds")]
    for base in serve(make_app(store, state_dir, controller)):
        log_in(page, base, "/queue")
        no_horizontal_overflow(page)
        shot(page, "paint-now-queue")
        page.get_by_role("button", name="Paint now: a heron in reeds").click()
        expect(page.get_by_role("status")).to_contain_text("Painting it now")
        assert page.url == base + "/" and controller.renders == 1
        assert [q.id for q in store.queued_prompts()][0] == ids[2]  # the render paints the first prompt

        page.goto(f"{base}/pictures/{pictures['new']}")
        again = page.locator("section.again")
        expect(again).to_contain_text("Queue it for a coming night, or paint it now.")
        no_horizontal_overflow(page)
        shot(page, "paint-now-picture")
        page.get_by_role("button", name="Paint it now with seed 1234").click()
        expect(page.get_by_role("status")).to_contain_text(
            "A picture is being painted now, so this one is first in the queue")  # the fox's render runs
        reused = store.queued_prompts()[0]
        assert (reused.prompt, reused.seed) == ("a quiet harbour at dawn, watercolor painting", 1234)

        page.goto(f"{base}/pictures/{pictures['new']}")
        page.get_by_role("button", name="Paint a variation now").click()
        expect(page.get_by_role("status")).to_contain_text("Queued a variation of this picture")
        first = store.queued_prompts()[0]
        assert first.source_picture_id == pictures["new"]
        no_horizontal_overflow(page)
