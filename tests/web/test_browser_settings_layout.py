"""Issue 40 item 17, in chromium at 390 px: the settings page (6,600-8,200 px tall) has contents, a Save
that stays in reach, its problems listed at the top with links to their fields, and a restore that
asks first and says what it undoes."""

from __future__ import annotations

from tests.web.browser import log_in, no_horizontal_overflow, shot, sync_api
from tests.web.test_browser_settings import running_daemon  # noqa: F401 - the fixture

HEIGHT = 844


def _in_view(locator) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT


def test_sections_sticky_save_linked_problems_and_a_confirmed_restore(running_daemon, page):  # noqa: F811
    expect = sync_api.expect
    daemon, base = running_daemon
    log_in(page, base, "/config")
    save = page.get_by_role("button", name="Save settings")
    contents = page.get_by_role("navigation", name="Sections of this page")
    for name in ("Schedule", "Panel", "Model", "Night estimate", "Every setting"):
        expect(contents.get_by_role("link", name=name, exact=True)).to_be_visible()
    assert _in_view(save), "Save is not on the first screen of the form"
    contents.get_by_role("link", name="Panel", exact=True).click()
    panel = page.locator("#group-panel")
    expect(page).to_have_url(f"{base}/config#group-panel")
    header = page.locator("header.top").bounding_box()
    assert panel.bounding_box()["y"] >= header["y"] + header["height"] - 1, "the section is under the header"
    assert _in_view(save), "Save is out of reach in the middle of the form"
    no_horizontal_overflow(page)

    page.get_by_label("Saturation").fill("1.5")
    page.get_by_label("Guidance", exact=True).fill("99")
    save.click()
    listed = page.locator("#form-problems")
    expect(listed).to_contain_text("Not saved: 2 settings to fix:")
    expect(listed.get_by_role("link", name="Saturation")).to_be_visible()
    assert listed.bounding_box()["y"] < page.locator("#group-schedule").bounding_box()["y"], "not at the top"
    listed.get_by_role("link", name="Guidance").click()
    expect(page).to_have_url(f"{base}/config#f-model-guidance")
    assert _in_view(page.get_by_label("Guidance", exact=True)) and _in_view(save)
    shot(page, "settings-problems-linked")
    no_horizontal_overflow(page)

    page.get_by_label("Saturation").fill("0.5")
    page.get_by_label("Guidance", exact=True).fill("")
    save.click()
    expect(page.get_by_role("status")).to_contain_text("Saved.")
    page.get_by_role("button", name="Restore the previous settings…").click()
    expect(page.locator("#restore-what")).to_contain_text(
        "This undoes your last save on the settings page: the settings go back to what they were before it.")
    expect(page.locator("table")).to_contain_text("Saturation")
    assert daemon.config.display.saturation == 0.5, "restored before the owner confirmed"
    no_horizontal_overflow(page)
    shot(page, "settings-restore-asks")
    page.get_by_role("button", name="Restore the previous settings", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("The previous settings are back")
    assert daemon.config.display.saturation is None
