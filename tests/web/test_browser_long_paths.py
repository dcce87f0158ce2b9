"""Issue 40, item 18, in chromium at 390 px: long paths wrap instead of widening the page.

A path has no space to wrap at: the queue's unknown-LoRA error (it names every folder searched), the
settings page's estimate lines and its list of every setting made the page 425-892 px wide.
"""

from __future__ import annotations

import time

from frame.config import Config, ModelConfig, WebConfig
from frame.statefile import write_json
from tests.web.browser import log_in, no_horizontal_overflow, serve, shot, sync_api
from tests.web.conftest import TOKEN, make_app

LONG = "/home/owner/" + "a_long_folder_name_without_hyphens_" * 4 + "stable_diffusion_v1_5_onnx"


def long_app(store, state_dir):
    write_json(state_dir / "estimate.json", {"lines": [f"model {LONG}/unet/model.onnx: peak 217 MB"],
                                             "made_at": time.time(), "origin": "frame estimate"})
    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN), model=ModelConfig(source=LONG))
    return make_app(store, state_dir, config=config)


def test_unknown_lora_error_and_settings_wrap(store, state_dir, pictures, page):
    for base in serve(long_app(store, state_dir)):
        log_in(page, base, "/queue")
        page.get_by_label("Prompt", exact=True).fill("a harbour <lora:" + "no_such_lora_name_" * 5 + ":1>")
        page.get_by_role("button", name="Queue it").click()
        sync_api.expect(page.locator("#form-error")).to_contain_text("unknown LoRA")
        no_horizontal_overflow(page)
        shot(page, "long-path-queue-error")
        page.goto(base + "/config")
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        sync_api.expect(page.get_by_text("peak 217 MB", exact=False)).to_be_visible()
        no_horizontal_overflow(page)
        shot(page, "long-path-settings")
