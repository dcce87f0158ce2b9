"""Issue 41 item 6, in chromium at 390 px: the settings page's models section lists the models with their
kind and precision, "Use this model" switches model.source, and the import form refuses a URL that
is not http(s) with one line; nothing overflows the phone's width."""

from __future__ import annotations

import shutil

from frame.models import demo_model_path
from tests.web.browser import log_in, no_horizontal_overflow, serve, shot, sync_api
from tests.web.conftest import make_app

NAME = "a-rather-long-model-name-from-civitai_v2-pruned"


def test_models_section_on_a_phone(store, state_dir, pictures, page):
    expect = sync_api.expect
    shutil.copytree(demo_model_path(), state_dir / "models" / NAME)
    for base in serve(make_app(store, state_dir)):
        log_in(page, base, "/config")
        page.get_by_role("link", name="Models", exact=True).click()
        section = page.locator("section[aria-labelledby=models-title]")
        entry = section.locator(f"li[data-model='{NAME}']")
        expect(entry).to_contain_text("SD 1.x · fp32")
        no_horizontal_overflow(page)
        shot(page, "models-section")
        entry.get_by_role("button", name=f"Use the model {NAME}").click()
        expect(page.get_by_text("Tonight's picture is painted with a-rather-long-model-name", exact=False)
               ).to_be_visible()
        expect(entry).to_contain_text("(in use)")
        page.fill("#import-url", "ftp://nas.local/model.safetensors")
        page.evaluate("document.querySelector('#import-url').type = 'text'")  # past the browser's own check
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page.get_by_text("No import started: only http:// and https:// URLs can be imported",
                                exact=False)).to_be_visible()
        no_horizontal_overflow(page)
        shot(page, "models-import-refused")
    assert "a-rather-long-model-name" in (state_dir / "settings.yaml").read_text()
