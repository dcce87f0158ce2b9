"""A queued prompt that cannot be painted is set aside instead of failing every night (issue 40 item 4):
its failed renders are counted (``Store.prompt_failed``), at ``SET_ASIDE_AFTER`` it is set aside with
the reason (listed on the queue page, skipped by the night), the notice names it, and the night paints
the next candidate at once. Failures that are not the prompt's (memory, another step) are not counted."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from frame.daemon import notices, schedule
from frame.daemon.jobs import night, render_job
from frame.daemon.jobs.supervisor import Outcome
from frame.daemon.service import Daemon
from frame.daemon.store.prompt_rows import SET_ASIDE_AFTER
from frame.web import create_blueprint
from frame.worker.records import read_job
from tests.daemon.conftest import clock, make_config
from tests.daemon.fakesupervisor import FakeSupervisor
from tests.web.conftest import login


def logged_in(app, token: str):
    client = app.test_client()
    assert login(client, token).status_code == 303
    return client


class BadPromptSupervisor(FakeSupervisor):
    """Paints every job but one whose queued prompt has "bad" in it (that fails as told)."""

    error, step = "generate failed: boom", "generate"

    def run(self, job_dir, *, stop, deadline=None):
        job = read_job(job_dir)
        if job.kind == "render" and job.choice is not None and "bad" in job.choice.prompt:
            FakeSupervisor.runs.append("failed")
            return Outcome("failed", error=self.error, step=self.step)
        return super().run(job_dir, stop=stop, deadline=deadline)


def test_failures_are_counted_and_an_edit_clears_them(store):
    prompt_id = store.queue_prompt("a bad fox")
    for count in range(1, SET_ASIDE_AFTER):
        assert (store.prompt_failed(prompt_id, "boom").failures, store.queued_prompt(prompt_id).set_aside) == \
            (count, None)
    assert store.prompt_failed(prompt_id, "boom").set_aside == "boom"
    assert store.update_prompt(prompt_id, prompt="a good fox").set_aside is None
    assert store.queued_prompt(prompt_id).failures == 0


def test_the_night_skips_a_prompt_set_aside(tmp_path, store):
    ctx = night.RenderContext(make_config(tmp_path), store, tmp_path, supervisor_factory=FakeSupervisor)
    aside = store.queue_prompt("a bad fox")
    for _ in range(SET_ASIDE_AFTER):
        store.prompt_failed(aside, "boom")
    store.queue_prompt("a red boat")
    assert render_job.build_job(ctx, 1, "night").choice.prompt == "a red boat"


@pytest.mark.parametrize(("error", "step"), [("the worker exceeded its memory limit", "generate"),
                                             ("no such panel", "prepare")])
def test_failures_that_are_not_the_prompts_are_not_counted(tmp_path, store, error, step):
    BadPromptSupervisor.error, BadPromptSupervisor.step = error, step
    try:
        ctx = night.RenderContext(make_config(tmp_path), store, tmp_path, supervisor_factory=BadPromptSupervisor)
        prompt_id = store.queue_prompt("a bad fox")
        outcome, _ = night.render(ctx, store.start_render("night", None), "night")
        assert outcome.status == "failed" and "queued prompt" in outcome.error
        assert store.queued_prompt(prompt_id).failures == 0
    finally:
        BadPromptSupervisor.error, BadPromptSupervisor.step = "generate failed: boom", "generate"


def _wait(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise TimeoutError


def test_a_bad_prompt_is_set_aside_and_the_night_paints_the_next(tmp_path):
    FakeSupervisor.runs = []
    config = make_config(tmp_path, web={"listen": "127.0.0.1:0", "token": "test-token-123456"},
                         schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240),
                                   "show_at": clock(240)})
    daemon = Daemon(config, supervisor_factory=BadPromptSupervisor, pages=create_blueprint)
    daemon.start()
    try:
        bad = daemon.store.queue_prompt("a bad fox <lora:gone>")
        good = daemon.store.queue_prompt("a red boat")
        now = datetime.now(UTC)
        tonight = schedule.Night("2026-12-07", now - timedelta(minutes=1), now + timedelta(hours=1), now)

        daemon.start_render("night", tonight, None)  # the first failure: the prompt stays first
        # the render thread frees the render lock before it sets the fallback's notice: wait for both
        _wait(lambda: FakeSupervisor.runs.count("failed") == 1 and not daemon._render_lock.locked()
              and daemon.status()["notice"] is not None)
        notice = daemon.status()["notice"]
        assert "queued prompt" in notice and "a bad fox <lora:gone>" in notice, notice
        assert daemon.store.queued_prompt(bad).failures == 1 and daemon.store.queued_prompt(good) is not None

        daemon.start_render("night", tonight, None)  # the second: set aside, and the night paints the next
        _wait(lambda: daemon.store.queued_prompt(good) is None)
        _wait(lambda: not daemon._render_lock.locked() and daemon.store.last_shown() is not None)
        assert daemon.store.last_shown().reason == "new picture"
        kept = daemon.store.queued_prompt(bad)
        assert kept.set_aside == "generate failed: boom"
        notice = daemon.status()["notice"]
        assert notice == notices.sentence(f"queued prompt {bad} (\u201ca bad fox <lora:gone>\u201d) could not be "
                                          "painted and is set aside: the queue page says why (edit it to try "
                                          "again); the next prompt is painted instead"), notice
        page = logged_in(daemon.app, "test-token-123456").get("/queue").get_data(as_text=True)
        assert "Set aside after 2 failed nights" in page and "generate failed: boom" in page
    finally:
        daemon.stop()
