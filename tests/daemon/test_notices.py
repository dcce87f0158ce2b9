"""Owner-facing failure sentences: what happened and what to do, never the raw exception."""

from __future__ import annotations

import pytest

from frame.daemon import notices
from frame.daemon.store.records import FeedHealth, RenderRow
from frame.web.present import feed_view, render_row_view

RAW = "RuntimeError: onnx node /unet/down_blocks.0/attentions.0/Softmax: shape (1, 8, 4096, 4096)"


@pytest.mark.parametrize("status, error, expected", [
    ("failed", f"failed at step 'load model': {RAW}", "The model could not be loaded: check model.source"),
    ("failed", f"failed at step 'prepare': {RAW}", "check display.panel and display.palette"),
    ("failed", "failed at step 'generate': the worker died 6 times; last: memory limit (512 MiB)",
     "It ran out of memory: use a smaller model.size"),
    ("failed", "[Errno 28] No space left on device: '/var/lib/frame/gallery/x.png'", "The SD card is full"),
    ("missed", "the render missed its deadline", "It was not finished by the deadline: fewer steps"),
    ("missed", "the daemon was down until after the deadline", "The frame was off or restarting"),
    ("failed", "superseded by a newer render", "A newer render replaced it; nothing to do."),
    ("failed", f"failed at step 'brand new step': {RAW}", "Something unexpected failed"),
    ("failed", None, "Something unexpected failed"),
    ("failed", "failed at step 'generate': http://***@nas/unet/model.onnx_data: bytes 0..9 failed after 12 "
               "retries over 601 s: connection problem (ConnectTimeout) (is the model server on and reachable?)",
     "The model server did not answer for model.http_give_up_seconds"),
    ("failed", "failed at step 'load model': http://nas/unet/model.onnx: the server ignored the Range header "
               "(answered 200 ...)", "The model server does not support range requests: serve the model with"),
    ("failed", "failed at step 'load model': http://nas/model_index.json: the model server refused access "
               "(HTTP 401); give it the token", "The model server refused access: check model.token"),
])
def test_render_failures_read_as_one_sentence_with_advice(status, error, expected):
    text = notices.render_failure(status, error)
    assert text.startswith(expected) or expected in text
    assert text.endswith(".") and text.count(". ") == 0 and RAW not in text


def test_fallback_and_show_notices():
    cause = notices.render_advice("failed", f"the render failed at step 'load model': {RAW}")
    assert notices.fallback_notice(cause, 7) == ("No new picture — the model could not be loaded: check "
                                                 "model.source on the settings page; favourite 7 is shown meanwhile.")
    assert notices.fallback_notice(notices.NO_RENDER, None).endswith("like a picture to have a favourite shown "
                                                                     "next time.")
    assert notices.show_failure_notice(4).startswith("Picture 4 could not be shown, so the previous one stays")


def test_history_rows_keep_the_raw_error_as_details():
    failed = {"id": 1, "status": "failed", "error": f"failed at step 'load model': {RAW}",
              "started_at": "2026-11-29T01:00:00+00:00", "finished_at": None}
    row = render_row_view(RenderRow.from_row(failed))
    assert row["failure"].startswith("The model could not be loaded") and row["details"].endswith(RAW)
    assert render_row_view(RenderRow.from_row({"id": 2, "status": "done", "error": None}))["failure"] == ""
    feed = feed_view(FeedHealth.from_row({"name": "news", "last_error": RAW, "from_cache": 1}))
    assert feed["failure"].startswith("The last fetch failed; its last good prompts") and feed["details"] == RAW
