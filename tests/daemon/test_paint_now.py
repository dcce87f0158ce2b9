"""Issue 40 item 16: "paint it now" for a waiting prompt, the owner action both the API and the pages
call (``frame.daemon.actions.queue.paint_now``): the prompt first in the queue, then a render now, which
paints the first paintable prompt (``render_job.build_job``)."""

from __future__ import annotations

import pytest

from frame.daemon.actions import queue as queue_actions
from frame.daemon.actions.errors import BadValue, NotRunning
from frame.daemon.http.app import create_app
from frame.daemon.http.contract import Busy
from frame.daemon.jobs.night import RenderContext
from frame.daemon.jobs.render_job import build_job
from frame.daemon.store.prompt_rows import SET_ASIDE_AFTER
from tests.daemon.test_api import AUTH, TOKEN, FakeController


def order(store) -> list[int]:
    return [prompt.id for prompt in store.queued_prompts()]


@pytest.fixture
def queued(store):
    return [store.queue_prompt(text) for text in ("a fox", "a whale", "a heron")]


def test_the_prompt_is_painted_by_the_render_it_starts(config, store, tmp_path, queued):
    controller = FakeController()
    answer = queue_actions.paint_now(store, controller, tmp_path, queued[2], "test")
    assert answer == {"render": "started"} and controller.rendering
    assert order(store) == [queued[2], queued[0], queued[1]]
    job = build_job(RenderContext(config=config, store=store, state_dir=tmp_path), 1, "now")
    assert job.choice.prompt_id == queued[2] and job.choice.prompt == "a heron"


def test_while_a_render_runs_it_is_first_for_the_next(store, tmp_path, queued):
    controller = FakeController()
    controller.rendering = True
    with pytest.raises(Busy):
        queue_actions.paint_now(store, controller, tmp_path, queued[1], "test")
    assert order(store)[0] == queued[1]


def test_without_a_daemon_or_for_a_prompt_no_render_paints_the_queue_stays(store, tmp_path, queued):
    with pytest.raises(NotRunning):
        queue_actions.paint_now(store, None, tmp_path, queued[2], "test")
    for _ in range(SET_ASIDE_AFTER):
        store.prompt_failed(queued[2], "the LoRA is broken")
    controller = FakeController()
    with pytest.raises(BadValue, match="set aside"):
        queue_actions.paint_now(store, controller, tmp_path, queued[2], "test")
    assert order(store) == queued and not controller.rendering


def test_the_api_paints_now(config, store, tmp_path, queued):
    controller = FakeController()
    client = create_app(config, store, token=TOKEN, controller=controller, state_dir=tmp_path).test_client()
    assert client.post(f"/api/prompts/{queued[1]}/paint-now").status_code == 401
    answer = client.post(f"/api/prompts/{queued[1]}/paint-now", headers=AUTH)
    assert answer.status_code == 202 and order(store)[0] == queued[1]
    busy = client.post(f"/api/prompts/{queued[2]}/paint-now", headers=AUTH)
    assert busy.status_code == 409 and "first in the queue" in busy.get_json()["error"]
    assert client.post("/api/prompts/999/paint-now", headers=AUTH).status_code == 404
