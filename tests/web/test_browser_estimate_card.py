"""Issue 40 item 20, in chromium at 390 px: the estimate card opens with its verdict, says when the
settings changed since, and keeps the engineer's lines folded."""

from __future__ import annotations

import time

from frame.config import Config, WebConfig, estimate_inputs
from frame.statefile import write_json
from tests.web.browser import log_in, no_horizontal_overflow, serve, shot, sync_api
from tests.web.conftest import TOKEN, make_app

MIB = 1 << 20


def test_the_verdict_comes_first(store, state_dir, pictures, page):
    expect = sync_api.expect
    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN))
    made_for = {**estimate_inputs.inputs(config), "model.steps": "20"}  # made before steps were changed
    write_json(state_dir / "estimate.json", {
        "lines": ["per step: 1.3 G multiply-adds, 1.0 MB of weights read from storage", "peak memory: 138 MB (vae)"],
        "made_at": time.time(), "origin": "tonight's render", "peak_bytes": 138 * MIB, "seconds_here": 720.0,
        "window_seconds": 21600.0, "memory_limit_bytes": 440 * MIB, "inputs": made_for})
    for base in serve(make_app(store, state_dir, config=config)):
        log_in(page, base, "/config")
        verdict = page.locator("#estimate-verdict")
        expect(verdict).to_have_text("Fits: about 12 min of the 6 h 00 min window, and 138 MB of the worker's "
                                     "440 MB (302 MB to spare).")
        expect(page.locator("#estimate-stale")).to_contain_text("The settings changed since this estimate (Steps)")
        expect(page.get_by_text("per step: 1.3 G multiply-adds", exact=False)).to_be_hidden()
        card = page.locator("section[aria-labelledby=estimate-title]")
        first = card.locator("p").first
        expect(first).to_have_id("estimate-verdict")
        page.get_by_text("Details: work per step").click()
        expect(page.get_by_text("per step: 1.3 G multiply-adds", exact=False)).to_be_visible()
        card.scroll_into_view_if_needed()
        no_horizontal_overflow(page)
        shot(page, "estimate-verdict-first")
