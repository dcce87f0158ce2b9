"""Pairing a phone in chromium at 390 px (issue 40 item 3): the login page a logged-out phone lands on,
the short code typed there, and the one-time link ``frame token --pair`` prints."""

from __future__ import annotations

from frame.web.pairing import PairingCodes
from tests.web.browser import no_horizontal_overflow, shot, sync_api


def test_a_phone_pairs_with_a_typed_code_and_with_the_link(server, page, state_dir):
    expect = sync_api.expect
    codes = PairingCodes(state_dir)  # what frame token --pair writes, from another process
    typed = codes.create("frame token --pair")

    page.goto(server + "/gallery")
    expect(page).to_have_url(server + "/login?next=/gallery")
    expect(page.get_by_role("button", name="Show a code on the frame")).to_be_visible()
    no_horizontal_overflow(page)
    shot(page, "pair-1-login")
    page.get_by_label("Pairing code", exact=True).fill(typed.shown_code().lower())
    page.get_by_role("button", name="Pair this phone").click()
    expect(page).to_have_url(server + "/gallery")
    expect(page.get_by_role("status")).to_contain_text("This phone is paired")
    expect(page.get_by_role("button", name="Log out", exact=True)).to_be_visible()
    shot(page, "pair-2-paired")

    page.get_by_role("button", name="Log out", exact=True).click()
    linked = codes.create("frame token --pair")
    page.goto(linked.link(server))
    expect(page.get_by_role("heading", name="Pair this phone")).to_be_visible()
    no_horizontal_overflow(page)
    shot(page, "pair-3-link")
    page.get_by_role("button", name="Pair this phone").click()
    expect(page.get_by_role("button", name="Log out", exact=True)).to_be_visible()

    page.goto(linked.link(server))  # used up: it says so and leads to the login page
    page.get_by_role("button", name="Pair this phone").click()
    expect(page.get_by_role("alert")).to_contain_text("wrong, used or expired")
    no_horizontal_overflow(page)
