"""Queued prompts through the real worker on the bundled demo model (issue 16): a prompt's own
steps, sampler, guidance, seed and size reach the picture; "more like this" paints image-to-image
from the gallery picture; a setting this model refuses costs the prompt its setting, not the night."""

from __future__ import annotations

import dataclasses

import pytest
from PIL import Image

from frame.daemon import queue as rules
from frame.daemon.jobs import night
from frame.daemon.store import gallery
from frame.daemon.store.records import StoredPicture
from frame.errors import UsageError
from frame.worker import prompt_settings, render
from frame.worker.records import PromptSettings, RenderJob, ThemeChoice, Why
from tests.daemon.conftest import make_config


@pytest.fixture
def ctx(tmp_path, store):
    config = make_config(tmp_path, display={"panel": "virtual", "size": "80x48", "min_refresh_seconds": 0},
                         model={"source": "demo", "size": "64x64", "steps": 2})
    return night.RenderContext(config, store, tmp_path)


def _paint(ctx) -> StoredPicture:
    render_id = ctx.store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now")
    assert outcome.status == "done", outcome.error
    return ctx.store.picture(picture_id)


def test_a_prompts_own_settings_and_seed_make_the_picture(ctx):
    prompt_id = ctx.store.queue_prompt("a red boat", steps=3, sampler="ddim", guidance=3.5, seed=4242, width=128,
                                       height=64)
    picture = _paint(ctx)
    assert (picture.prompt, picture.seed, picture.steps, picture.sampler, picture.guidance) == \
        ("a red boat", 4242, 3, "ddim", 3.5)
    assert (picture.width, picture.height) == (128, 64)
    assert Image.open(gallery.picture_path(ctx.state_dir, picture.file)).size == (128, 64)
    assert ctx.store.queued_prompt(prompt_id) is None  # painted: out of the queue


def test_more_like_this_paints_image_to_image_from_the_gallery_picture(ctx):
    source = _paint_source(ctx)
    prompt_id, _ = rules.queue_variation(ctx.config, ctx.store, ctx.state_dir, source, 0.5)
    picture = _paint(ctx)
    assert (picture.prompt, picture.seed) == (source.prompt, source.seed)
    assert picture.why["method"] == "variation" and picture.why["source_picture_id"] == source.id
    assert picture.why["strength"] == 0.5
    parameters = Image.open(gallery.picture_path(ctx.state_dir, picture.file)).info["parameters"]
    assert "Denoising strength: 0.5" in parameters  # the pipeline ran image-to-image
    assert ctx.store.queued_prompt(prompt_id) is None


def _paint_source(ctx) -> StoredPicture:
    ctx.store.queue_prompt("a lighthouse", seed=77)
    return _paint(ctx)


class RefusingPipe:
    """A model that refuses the size 128x64 (as an export with fixed axes would)."""

    def settings(self, prompt, negative, steps, guidance, sampler, seed, width, height, strength=None, *, warn=True):
        if (width, height) == (128, 64):
            raise UsageError("size 128x64 is not allowed: this export has fixed axes and only renders 64x64")

    def auto_size(self, aspect):
        return 64, 64


def test_a_setting_the_model_refuses_paints_with_the_nights(ctx, tmp_path):
    job = RenderJob(render_id=1, render_kind="night", state_dir=tmp_path, seed=5,
                    choice=ThemeChoice("a fox", "", "", "", "queue", Why("queue", "you queued this prompt")),
                    settings=PromptSettings(steps=3, width=128, height=64))
    config = render._own_settings(job, ctx.config, RefusingPipe(), tmp_path)
    assert config is ctx.config  # the night's settings, steps included
    assert render._own_settings(job, ctx.config, None, tmp_path) is ctx.config  # a restart does not ask again
    meta = render.picture_meta(job, ctx.config, job.choice, None, {}, tmp_path)
    assert "painted with the night's settings: size 128x64 is not allowed" in meta.why["own_settings"]
    fitting = dataclasses.replace(job, settings=PromptSettings(steps=3))
    assert render._own_settings(fitting, ctx.config, RefusingPipe(), tmp_path / "other").model.steps == 3


def test_settings_replace_the_model_section():
    config = make_config("/tmp/x", model={"steps": 8})
    own = prompt_settings.with_prompt_settings(config, PromptSettings(steps=3, width=128, height=64))
    assert (own.model.steps, own.model.size, own.model.sampler) == (3, "128x64", config.model.sampler)
    assert prompt_settings.with_prompt_settings(config, PromptSettings()) is config
