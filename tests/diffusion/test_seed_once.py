""""Random seed" is decided in one place (issue 30, item 2): ``frame.seeds.resolve_seed``, where a
render is asked for (the night's job, stored in ``job.json``; ``frame render``, remembered in its
``--resume`` folder; the render server's request). The pipeline takes the concrete number only; the
night, the render server and ``resume`` each used to draw their own."""

from __future__ import annotations

import threading

import pytest
import requests

from frame import seeds
from frame.cli.serve_render import start_server
from frame.config.schema import Config
from frame.daemon.jobs import night
from frame.daemon.store.database import Store
from frame.diffusion import load_pipeline, resume
from frame.errors import UsageError
from frame.models import demo_model_path
from tests.daemon.conftest import make_config

TOKEN = "serve-token-1234567890"
DRAWN = 4242


@pytest.fixture
def drawn(monkeypatch):
    """Every random draw gives ``DRAWN``: a place that draws on its own shows up as another number."""
    monkeypatch.setattr(seeds, "random_seed", lambda: DRAWN)


def test_the_pipeline_takes_a_concrete_seed_only():
    pipe = load_pipeline(demo_model_path())
    for random in (-1, None):
        with pytest.raises(UsageError, match="resolve_seed"):
            pipe.settings("a cat", seed=random, width=32, height=32)
    with pytest.raises(UsageError, match="got -2"):
        pipe.settings("a cat", seed=-2, width=32, height=32)
    assert pipe.settings("a cat", seed=7, width=32, height=32).seed == 7


def test_the_nights_job_draws_with_resolve_seed_and_stores_the_number(drawn, tmp_path):
    store = Store.open(tmp_path)
    try:
        ctx = night.RenderContext(make_config(tmp_path), store, tmp_path)
        assert night.build_job(ctx, 1, "now").seed == DRAWN  # the theme choice's job
        store.queue_prompt("a red fox")  # no seed of its own: random
        assert night.build_job(ctx, 2, "now").seed == DRAWN
    finally:
        store.close()


def test_frame_renders_resume_folder_remembers_the_one_draw(drawn, tmp_path):
    assert resume.resumable_seed(tmp_path, -1) == DRAWN
    assert resume.resumable_seed(tmp_path, 9) == 9


def test_the_render_servers_random_seed_is_drawn_with_resolve_seed(drawn):
    server = start_server(str(demo_model_path()), "frame", Config(), TOKEN, "127.0.0.1:0")
    try:
        answer = {}

        def post():
            answer["reply"] = requests.post(server.url + "/sdapi/v1/txt2img", timeout=60,
                                            headers={"Authorization": f"Bearer {TOKEN}"},
                                            json={"prompt": "x", "steps": 1, "width": 32, "height": 32, "seed": -1})

        thread = threading.Thread(target=post)
        thread.start()
        while thread.is_alive():
            server.jobs.run_next(timeout=0.2)
        thread.join()
    finally:
        server.close()
    reply = answer["reply"]
    assert reply.status_code == 200 and reply.json()["parameters"]["seed"] == -1
    assert "Seed: 4242," in reply.json()["info"]
