"""Issue 40, item 21, in chromium at 390 px: the small things a new owner stumbled on."""

from __future__ import annotations

from tests.web.browser import log_in, no_horizontal_overflow, shot, sync_api


def test_four_or_five_stars_press_like_and_two_press_dislike(server, page, store, pictures):
    expect = sync_api.expect
    log_in(page, server, f"/pictures/{pictures['new']}")
    like = page.get_by_role("button", name="Like", exact=True)
    dislike = page.get_by_role("button", name="Dislike", exact=True)
    for stars, liked, disliked in (("5 stars", "true", "false"), ("3 stars", "false", "false"),
                                   ("2 stars", "false", "true"), ("4 stars", "true", "false")):
        page.get_by_role("button", name=stars).click()
        expect(page.get_by_role("button", name=stars)).to_have_attribute("aria-pressed", "true")
        expect(like).to_have_attribute("aria-pressed", liked)
        expect(dislike).to_have_attribute("aria-pressed", disliked)
    no_horizontal_overflow(page)
    shot(page, "stars-press-like")


def test_the_size_hint_is_the_size_the_frame_paints(server, page):
    """The placeholder said 768x512 whatever the frame paints (672x400 for the demo model on the
    800x480 panel): it is asked of the configured model now."""
    log_in(page, server, "/queue")
    page.get_by_text("More options").click()
    size = page.locator("#size")
    sync_api.expect(size).to_have_attribute("placeholder", "672x400")
    sync_api.expect(page.locator("label[for=size]")).to_contain_text("empty: the frame's 672x400")
    no_horizontal_overflow(page)
