"""A queued prompt's own settings on the render server (issue 16): the real render worker (under the
real supervisor) against the fake AUTOMATIC1111 server. The prompt's own steps, sampler (under
A1111's name), guidance, size, seed and negative prompt reach the request body, each one it leaves
out comes from ``render.remote``, and the stored picture says what the server painted with."""

from __future__ import annotations

import pytest
from PIL import Image

from frame.daemon.jobs import night
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from tests.daemon.conftest import make_config
from tests.remote.fake_a1111 import INFOTEXT, FakeA1111, split_sampler

FAST = {"connect_timeout_seconds": 1.0, "poll_seconds": 0.1, "lost_after_seconds": 1.0, "size": "96x64"}
NIGHT = {"steps": 25, "sampler_name": "DPM++ 2M Karras", "cfg_scale": 7.0, "width": 96, "height": 64}  # FAST
NIGHT_STORED = {"steps": 25, "sampler": "dpm++2m_karras", "guidance": 7.0, "width": 96, "height": 64}

CASES = [  # (the queued prompt's own settings, the request's values, the stored picture's)
    pytest.param({"steps": 12, "sampler": "euler_a", "guidance": 4.5, "width": 128, "height": 64},
                 {"steps": 12, "sampler_name": "Euler a", "cfg_scale": 4.5, "width": 128, "height": 64},
                 {"steps": 12, "sampler": "euler_a", "guidance": 4.5, "width": 128, "height": 64}, id="all-own"),
    pytest.param({"steps": 9, "width": 64, "height": 128},
                 {**NIGHT, "steps": 9, "width": 64, "height": 128},
                 {**NIGHT_STORED, "steps": 9, "width": 64, "height": 128}, id="steps-and-size-only"),
    pytest.param({"sampler": "dpm++2m", "guidance": 0.0},
                 {**NIGHT, "sampler_name": "DPM++ 2M", "cfg_scale": 0.0},
                 {**NIGHT_STORED, "sampler": "dpm++2m", "guidance": 0.0}, id="sampler-and-zero-guidance"),
    pytest.param({}, NIGHT, NIGHT_STORED, id="none-of-its-own"),
]


@pytest.fixture
def ctx(tmp_path):
    from frame.config.schema import RemoteRenderConfig

    def make(url: str):
        config = make_config(tmp_path, model={"size": "64x64", "steps": 2}, display={"size": "80x48"},
                             render={"backend": "remote", "remote": RemoteRenderConfig(url=url, **FAST)})
        opened.append(night.RenderContext(config, Store.open(tmp_path), tmp_path))
        return opened[-1]

    opened: list[night.RenderContext] = []
    yield make
    for context in opened:
        context.store.close()


@pytest.mark.parametrize("own, sent, stored", CASES)
def test_a_queued_prompts_own_settings_reach_the_server_and_the_picture(ctx, own, sent, stored):
    with FakeA1111(job_seconds=0.3) as fake:
        context = ctx(fake.url)
        context.store.queue_prompt("a lighthouse in a storm", "fog", seed=1234, **own)
        render_id = context.store.start_render("now", None)
        outcome, picture_id = night.render(context, render_id, "now")
    assert outcome.status == "done", outcome.error
    [body] = [b for _, path, _, b in fake.requests if path == "/sdapi/v1/txt2img"]
    assert {key: body[key] for key in sent} == sent
    assert (body["prompt"], body["negative_prompt"], body["seed"]) == ("a lighthouse in a storm", "fog", 1234)
    picture = context.store.picture(picture_id)
    assert {key: getattr(picture, key) for key in stored} == stored
    assert (picture.seed, picture.negative_prompt, picture.model) == (1234, "fog", "dreamshaper_8")
    assert picture.why["painted"] == f"on the render server {fake.url} (dreamshaper_8)"
    assert "own_settings" not in picture.why and "remote_fallback" not in picture.why
    sampler, schedule = split_sampler(sent["sampler_name"])
    image = Image.open(gallery.picture_path(context.state_dir, picture.file))
    assert image.info["parameters"] == INFOTEXT.format(
        prompt="a lighthouse in a storm", negative="fog", steps=sent["steps"], sampler=sampler, schedule=schedule,
        cfg=sent["cfg_scale"], seed=1234, width=sent["width"], height=sent["height"])
    assert image.size == (sent["width"], sent["height"])
