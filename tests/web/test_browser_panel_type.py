"""Issue 40 item 21, in chromium at 390 px: the panel type is chosen on the phone's settings page, and
the running daemon takes it over at once (the picture on the panel is shown again)."""

from __future__ import annotations

from tests.web.browser import log_in, no_horizontal_overflow, shot, sync_api
from tests.web.test_browser_settings import running_daemon  # noqa: F401 - the fixture


def test_the_panel_type_is_a_setting_on_the_phone(running_daemon, page):  # noqa: F811
    daemon, base = running_daemon
    log_in(page, base, "/config")
    panel = page.get_by_label("Panel type", exact=True)
    sync_api.expect(panel).to_have_value("virtual")
    assert "inky-impression-7.3" in panel.locator("option").all_inner_texts()
    panel.select_option("waveshare-7in3e")
    page.get_by_role("button", name="Save settings").click()
    sync_api.expect(page.get_by_role("status")).to_contain_text("Panel type")
    sync_api.expect(page.get_by_label("Panel type", exact=True)).to_have_value("waveshare-7in3e")
    assert daemon.config.display.panel == "waveshare-7in3e"
    assert "panel: waveshare-7in3e" in (daemon.state_dir / "settings.yaml").read_text()
    no_horizontal_overflow(page)
    shot(page, "settings-panel-type")
