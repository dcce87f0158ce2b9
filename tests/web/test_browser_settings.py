"""The phone pages in a real headless browser (Debian's chromium driven by Playwright, no downloads):
the settings page saved and applied by the running daemon.

Starts the daemon's real app (waitress on 127.0.0.1, ephemeral port, temp state dir, real store seeded
with pictures) and checks what is stored behind what the page shows. Screenshots at a phone viewport go
to ``test-artifacts/web/``. Setup: ``tests/web/browser.py`` and the browser fixtures in ``conftest.py``.
"""

from __future__ import annotations

import pytest

from tests.web.browser import no_horizontal_overflow, shot, sync_api
from tests.web.conftest import TOKEN


@pytest.fixture
def running_daemon(tmp_path):
    """The real daemon (fake workers) with its phone pages on an ephemeral port: what a save changes."""
    import dataclasses

    from frame.config import Config, ScheduleConfig, WebConfig
    from frame.daemon.service import Daemon
    from frame.web import create_blueprint
    from tests.daemon.conftest import clock
    from tests.daemon.fakesupervisor import FakeSupervisor

    config = Config(state_dir=str(tmp_path / "state"), web=WebConfig(listen="127.0.0.1:0", token=TOKEN),
                    schedule=ScheduleConfig(timezone="UTC", render_at=clock(180), deadline=clock(240),
                                            show_at=clock(250)))
    daemon = Daemon(dataclasses.replace(config), supervisor_factory=FakeSupervisor, pages=create_blueprint)
    daemon.start()
    try:
        yield daemon, f"http://127.0.0.1:{daemon.server.port}"
    finally:
        daemon.stop()


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None, f"{locator} is not on the page"
    return box


def _stacked_full_width(page, label: str) -> None:
    """The field named ``label`` sits under its label and is as wide as the text fields of its group
    (a bare select once sat beside its label, 120 px wide, at 390 px)."""
    field = page.get_by_label(label, exact=True)
    caption = page.locator(f"label[for='{field.get_attribute('id')}']")
    reference = page.get_by_label("Saturation", exact=True)
    box, text = _box(field), _box(caption)
    assert box["y"] >= text["y"] + text["height"] - 1, f"{label}: the field is beside its label, not under it"
    assert abs(box["width"] - _box(reference)["width"]) <= 1, f"{label}: {box['width']} px wide, not full width"


def test_owner_changes_a_setting_and_sees_it_applied(running_daemon, page):
    """Issue 16: a bad value is refused next to its field, a good one is saved to settings.yaml and the
    running daemon's schedule follows at once (the status page's next render), and one tap restores."""
    from tests.daemon.conftest import clock

    expect = sync_api.expect
    daemon, base = running_daemon
    page.goto(base + "/login?next=/config")
    page.get_by_label("Owner token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Save settings")).to_be_visible()

    page.get_by_label("Saturation").fill("1.5")
    page.get_by_label("Dither").select_option("atkinson")
    page.get_by_role("button", name="Save settings").click()
    saturation = page.get_by_label("Saturation")
    expect(saturation).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-display-saturation-problem")).to_have_text("must be between 0 and 1, got 1.5")
    expect(page.get_by_label("Dither")).to_have_value("atkinson")  # the rest of the answer is kept
    assert not (daemon.state_dir / "settings.yaml").exists()
    no_horizontal_overflow(page)
    for label in ("Dither", "Fit", "Log level", "Start painting at"):
        _stacked_full_width(page, label)
    problem, box = _box(page.locator("#f-display-saturation-problem")), _box(saturation)
    assert 0 <= problem["y"] - (box["y"] + box["height"]) <= 12, "the problem is not right under its field"
    assert page.locator("#f-display-saturation-problem").evaluate(
        "el => getComputedStyle(el).color") == page.locator(".error[role=alert]").first.evaluate(
        "el => getComputedStyle(el).color"), "the problem is not in the page's error style"
    shot(page, "9-settings-refused")

    new_time = clock(120)
    saturation.fill("")
    page.get_by_label("Start painting at").fill(new_time)
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("status")).to_contain_text("Saved. Applies at once")
    expect(page.get_by_label("Start painting at")).to_have_value(new_time)
    assert daemon.config.schedule.render_at == new_time and daemon.config.display.dither == "atkinson"
    shot(page, "10-settings-saved")
    page.get_by_role("link", name="Status").click()
    expect(page.locator("dl")).to_contain_text(f"{new_time} UTC")  # the running scheduler moved

    page.get_by_role("link", name="Settings").click()
    page.get_by_role("button", name="Restore the previous settings…").click()
    expect(page.locator("#restore-what")).to_contain_text("This undoes your last save")  # issue 40: asked first
    assert daemon.config.schedule.render_at == new_time
    page.get_by_role("button", name="Restore the previous settings", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("The previous settings are back")
    assert daemon.config.schedule.render_at != new_time


