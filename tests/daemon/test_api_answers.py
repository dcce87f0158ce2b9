"""The API's JSON stays what 0.1 answered while its rows and status become typed records (issue 15).

``tests/fixtures/api/*.json`` were captured from the code *before* the store and status records (run
with ``FRAME_CAPTURE_API=1`` to rewrite them — only when an answer is meant to change) on the 0.1
database of ``tests/fixtures/formats/state`` and a daemon whose live status has a picture on the
panel and a render half-way: frame.js, ``frame status --json`` and owners' scripts read these keys.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from frame.daemon import status as status_module
from frame.daemon.http.app import create_app
from frame.daemon.service import Daemon
from tests.daemon.conftest import make_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ANSWERS = FIXTURES / "api"
NOW = 1_764_633_600.0  # a fixed clock: started_at and the ETA come from time.time()
PATHS = {"status": "/api/status", "pictures": "/api/pictures", "pictures-favourites": "/api/pictures?favourites=1",
         "picture-1": "/api/pictures/1", "picture-4": "/api/pictures/4", "prompts": "/api/prompts"}


@pytest.fixture
def daemon(tmp_path, monkeypatch):
    monkeypatch.setattr(status_module.time, "time", lambda: NOW)
    shutil.copytree(FIXTURES / "formats" / "state", tmp_path / "state")
    config = make_config(tmp_path / "state", web={"token": "answers-token"})
    running = Daemon(config)
    running.live.update(shown={"picture_id": 2, "reason": "night", "since": "2026-12-01T21:00:00+00:00",
                               "output": "shown"}, next_runs={"night": "2026-12-02T02:00:00+00:00", "show": None})
    running.live.render_started(7, "now")
    running.live.render_progress(stage="generating (denoising)", step=2, steps=6, fraction=0.33)
    running.live.render_progress(stage="generating (denoising)", step=3, steps=6, fraction=0.5, eta_seconds=12.5,
                                 preview=True)
    running.store.queue_prompt("a red boat", "blurry", "sea")
    running.store.rate(3, "stars", 5)
    running.store.set_feed_health("harbour", "https://owner:secret@feeds.example/rss?key=abc", True, 4, None, False)
    running.store.set_feed_health("museum", "https://museum.example/feed", False, 0, "timed out", True)
    yield running
    running.store.close()
    running.lock.release()


@pytest.mark.parametrize("name", sorted(PATHS))
def test_the_api_answers_as_0_1_did(daemon, name):
    app = create_app(daemon.config, daemon.store, token="answers-token", controller=daemon,
                     state_dir=daemon.state_dir)
    answer = app.test_client().get(PATHS[name], headers={"Authorization": "Bearer answers-token"})
    assert answer.status_code == 200
    data = _stable(answer.get_json())
    path = ANSWERS / f"{name}.json"
    if os.environ.get("FRAME_CAPTURE_API"):
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert data == json.loads(path.read_text())


def _stable(data):
    """Blank what depends on the day the test runs (when the prompt was queued, the feeds fetched)."""
    for row, key in [(p, "created_at") for p in data.get("prompts", [])] + [
            (f, k) for f in data.get("feeds", []) for k in ("last_attempt_at", "last_ok_at")]:
        row[key] = "<time>" if row.get(key) else row.get(key)
    return data
