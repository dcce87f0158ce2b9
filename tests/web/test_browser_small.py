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


def test_a_queue_tap_keeps_its_place_in_the_list(server, page, store):
    """Every move, edit or removal reloaded the page at its top: the tapped prompt is in view now."""
    expect = sync_api.expect
    ids = [store.queue_prompt(f"prompt number {n}, a long description of a quiet scene") for n in range(1, 13)]
    log_in(page, server, "/queue")
    tenth = page.locator(f"#prompt-{ids[9]}")

    def in_view(locator) -> None:
        """Waits for it: the URL changes before the new page has loaded and scrolled to its anchor."""
        expect(locator).to_be_in_viewport(ratio=1.0)

    page.get_by_role("button", name="Move up: prompt number 10, a long description of a quiet scene").click()
    expect(page).to_have_url(f"{server}/queue#prompt-{ids[9]}")
    assert [q.id for q in store.queued_prompts()].index(ids[9]) == 8
    in_view(tenth)
    assert page.evaluate("window.scrollY") > 0
    header = page.locator("header").bounding_box()
    assert tenth.bounding_box()["y"] >= header["y"] + header["height"], "under the sticky header"
    page.get_by_role("button", name="Remove: prompt number 10, a long description of a quiet scene").click()
    expect(page.get_by_role("status")).to_contain_text("Removed from the queue")
    assert ids[9] not in [q.id for q in store.queued_prompts()]
    expect(page).to_have_url(f"{server}/queue#prompt-{ids[8]}")  # the one that took its place
    in_view(page.locator(f"#prompt-{ids[8]}"))
    page.get_by_role("link", name="Edit: prompt number 11, a long description of a quiet scene").click()
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{server}/queue#prompt-{ids[10]}")
    in_view(page.locator(f"#prompt-{ids[10]}"))
    no_horizontal_overflow(page)
    shot(page, "queue-keeps-its-place")


def test_the_same_photo_uploaded_twice_is_one_picture(server, page, store, tmp_path):
    from tests.web.test_upload import jpeg

    expect = sync_api.expect
    photo = tmp_path / "IMG_0042.jpg"
    photo.write_bytes(jpeg(size=(300, 200)))
    log_in(page, server, "/upload")
    page.get_by_label("Photo", exact=True).set_input_files(str(photo))
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("status")).to_contain_text("Photo added to the gallery")
    first = page.url
    page.goto(server + "/upload")
    page.get_by_label("Photo", exact=True).set_input_files(str(photo))
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("status")).to_contain_text("This photo is already in the gallery")
    assert page.url == first
    assert len([p for p in store.pictures() if p.origin == "upload"]) == 1
    no_horizontal_overflow(page)


def test_the_taste_explanation_is_in_plain_words(server, page, store, state_dir):
    """Issue 40 item 19: "warmth × realism" and "how much you may like it 100 %" beside "5 of your 8 most
    similar were liked"; the page says it in words, one count."""
    from tests.web.conftest import write_png

    write_png(state_dir / "gallery" / "taste.png", (90, 120, 200))
    why = {"mode": "model", "score": 1.0, "ratings": 14, "method": "taste (model)",
           "candidate": {"theme": "lakes"},
           "sentence": "expected liking 1.00: on warmth × realism, 5 of your 8 most similar rated pictures were liked"}
    picture = store.add_picture(file="taste.png", prompt="a lake, oil painting", seed=3, why=why)
    log_in(page, server, f"/pictures/{picture}")
    card = page.locator("details.why")
    sync_api.expect(card).to_contain_text(
        "Chosen for your taste: of the 8 rated pictures most like it in the warmth of its colours and how "
        "realistic it looks, you liked 5.")
    page.get_by_text("More about this choice").click()
    text = card.inner_text()
    assert "×" not in text and "%" not in text and "how much you may like it" not in text
    no_horizontal_overflow(page)
    shot(page, "taste-in-plain-words")
