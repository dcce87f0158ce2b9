"""Issue 40, item 13, in chromium at 390 px: names holding a right-to-left override read as stored.

The queue page's LoRA and embedding buttons (``frame.web.shown_text``, on the server) and the render
progress the page polls (``plain`` in ``frame.js``) show each control character as its code point.
"""

from __future__ import annotations

from tests.lora_files import demo_lora
from tests.web.browser import log_in, no_horizontal_overflow, shot, sync_api

RLO = "\u202e"


def test_queue_page_shows_file_names_neutralised(server, page, state_dir):
    for name in (f"loras/wood{RLO}gpj.safetensors", f"embeddings/ink{RLO}gpj.pt"):
        (state_dir / name).parent.mkdir(exist_ok=True)
        (state_dir / name).write_bytes(b"")
    demo_lora(state_dir / f"loras/wood{RLO}gpj.safetensors")  # listed only with a LoRA's header
    log_in(page, server, "/queue")
    body = page.locator("body").inner_text()
    assert RLO not in body
    sync_api.expect(page.locator('[data-into="prompt"]')).to_have_text("ink[U+202E]gpj")
    no_horizontal_overflow(page)
    shot(page, "names-neutralised-queue")


def test_polled_progress_shows_names_neutralised(server, page, controller):
    controller.render = {"id": 1, "kind": "night", "stage": "denoising", "step": 4, "steps": 20,
                         "backend_note": "painting with model at /srv/mod" + RLO + "gpj"}
    log_in(page, server, "/status")
    progress = page.locator("#progress")
    sync_api.expect(progress).to_contain_text("step 4 of 20")
    controller.render = dict(controller.render, step=9, stage="denoising " + RLO + "tset",
                             backend_note="the server at /srv/b" + RLO + "gpj is slow")
    sync_api.expect(progress).to_contain_text("step 9 of 20")  # polled by frame.js after ~2 s
    sync_api.expect(progress).to_contain_text("denoising [U+202E]tset")
    sync_api.expect(progress).to_contain_text("/srv/b[U+202E]gpj is slow")
    assert RLO not in progress.inner_text()
    no_horizontal_overflow(page)
