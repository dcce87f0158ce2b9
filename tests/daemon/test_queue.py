"""The owner's queue (issue 16): order, edits, removal and per-prompt settings in the store; the
checks of ``frame.daemon.queue``; and the night's job carrying a queued prompt's settings and seed,
and a "more like this" variation's picture and strength."""

from __future__ import annotations

import sqlite3

import pytest

from frame.daemon import queue as rules
from frame.daemon.jobs.night import RenderContext, build_job
from frame.daemon.store import gallery, migrations
from frame.daemon.store.database import Store
from frame.daemon.store.records import StoredPicture
from frame.diffusion.img2img import DEFAULT_STRENGTH
from frame.taste.ratings import rating_class
from frame.worker.choose import to_rating
from frame.worker.records import PromptSettings, RenderJob
from tests.daemon.conftest import add_picture, make_config


def _order(store: Store) -> list[str]:
    return [p.prompt for p in store.queued_prompts()]


def test_prompts_keep_their_order_and_move(store):
    ids = [store.queue_prompt(text) for text in ("a", "b", "c", "d")]
    assert [p.position for p in store.queued_prompts()] == [1, 2, 3, 4]
    store.move_prompt(ids[3], 1)
    assert _order(store) == ["d", "a", "b", "c"]
    store.move_prompt(ids[0], 4)
    assert _order(store) == ["d", "b", "c", "a"]
    store.queue_prompt("e")  # a new prompt goes to the end, after every moved one
    assert _order(store) == ["d", "b", "c", "a", "e"]


@pytest.mark.parametrize("position", [0, 6, -1, True, "2"])
def test_a_position_outside_the_queue_is_refused(store, position):
    ids = [store.queue_prompt(text) for text in "abcde"]
    with pytest.raises(ValueError, match="from 1 to 5"):
        store.move_prompt(ids[0], position)
    assert _order(store) == list("abcde")


def test_remove_and_edit_only_waiting_prompts(store):
    first, second = store.queue_prompt("a red fox"), store.queue_prompt("a blue whale")
    store.remove_prompt(first)
    assert _order(store) == ["a blue whale"]
    with pytest.raises(KeyError):
        store.remove_prompt(first)
    edited = store.update_prompt(second, prompt="a grey whale", steps=12, seed=7)
    assert (edited.prompt, edited.steps, edited.seed, edited.sampler) == ("a grey whale", 12, 7, None)
    assert store.update_prompt(second, steps=None).steps is None  # back to the night's setting
    store.mark_prompt_used(second, picture_id=1)
    with pytest.raises(KeyError):
        store.update_prompt(second, prompt="too late")
    with pytest.raises(KeyError):
        store.remove_prompt(second)
    with pytest.raises(ValueError, match="unknown prompt fields"):
        store.queue_prompt("x", colour="red")


def test_per_prompt_settings_are_stored_and_default_to_none(store, tmp_path):
    plain = store.queue_prompt("plain")
    own = store.queue_prompt("own", "blurry", "sea", steps=20, sampler="ddim", guidance=5.5, seed=42, width=768,
                             height=512)
    store.close()
    reopened = Store.open(tmp_path)
    try:
        by_id = {p.id: p for p in reopened.queued_prompts()}
        assert (by_id[plain].steps, by_id[plain].sampler, by_id[plain].guidance, by_id[plain].seed,
                by_id[plain].size) == (None, None, None, None, None)
        row = by_id[own]
        assert (row.negative_prompt, row.theme, row.steps, row.sampler, row.guidance, row.seed, row.size) == \
            ("blurry", "sea", 20, "ddim", 5.5, 42, "768x512")
    finally:
        reopened.close()


def test_a_version_2_queue_migrates_in_its_order(tmp_path):
    conn = sqlite3.connect(tmp_path / "frame.db")
    for statement in migrations.MIGRATIONS[0].split(";") + migrations.MIGRATIONS[1].split(";"):
        if statement.strip():
            conn.execute(statement)
    for text in ("old one", "old two"):
        conn.execute("INSERT INTO prompts (prompt, created_at) VALUES (?, '2026-01-01')", (text,))
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    store = Store.open(tmp_path)
    try:
        assert _order(store) == ["old one", "old two"]
        store.queue_prompt("new")
        assert _order(store) == ["old one", "old two", "new"]
    finally:
        store.close()


# the checks -----------------------------------------------------------------------------------------

def test_settings_from_json_and_form_text():
    assert rules.parse_settings({"steps": 20, "sampler": "ddim", "guidance": 6, "seed": 5, "size": "768x512"}) == \
        {"steps": 20, "sampler": "ddim", "guidance": 6.0, "seed": 5, "width": 768, "height": 512}
    assert rules.parse_settings({"steps": "20", "guidance": "7.5", "seed": "-1", "size": "", "sampler": ""}) == \
        {"steps": 20, "guidance": 7.5, "seed": None, "width": None, "height": None, "sampler": None}
    assert rules.parse_settings({}) == {}


@pytest.mark.parametrize(("values", "field"), [
    ({"steps": 0}, "steps"), ({"steps": 2.5}, "steps"), ({"steps": "²"}, "steps"), ({"steps": True}, "steps"),
    ({"sampler": "heun"}, "sampler"), ({"guidance": -1}, "guidance"), ({"guidance": "nan"}, "guidance"),
    ({"seed": -2}, "seed"), ({"seed": 2**32}, "seed"), ({"size": "500x500"}, "size"), ({"size": "512"}, "size"),
    ({"size": "4096x512"}, "size"), ({"size": 512}, "size")])
def test_bad_settings_name_their_field(values, field):
    with pytest.raises(rules.QueueError) as caught:
        rules.parse_settings(values)
    assert caught.value.field == field


def test_strength_is_0_3_to_0_8_and_defaults_as_the_pipeline():
    assert rules.DEFAULT_STRENGTH == DEFAULT_STRENGTH
    assert rules.parse_strength(None) == DEFAULT_STRENGTH and rules.parse_strength("0.3") == 0.3
    for bad in (0.2, 0.81, "x", 1):
        with pytest.raises(rules.QueueError, match="strength"):
            rules.parse_strength(bad)


def test_a_model_without_vae_encoder_is_refused_at_queue_time(tmp_path, store):
    assert rules.variation_problem(make_config(tmp_path)) is None  # the demo model has its encoder
    folder = tmp_path / "model"
    (folder / "vae_decoder").mkdir(parents=True)
    (folder / "model_index.json").write_text("{}")
    config = make_config(tmp_path, model={"source": str(folder)})
    assert "vae_encoder/model.onnx" in rules.variation_problem(config)
    picture = _picture(store, tmp_path)
    with pytest.raises(rules.QueueError, match="vae_encoder") as caught:
        rules.queue_variation(config, store, tmp_path, picture, 0.5)
    assert caught.value.field == "model"
    assert store.queued_prompts() == [] and picture.rating_kind is None
    assert store.query("SELECT COUNT(*) FROM ratings")[0][0] == 0


def _picture(store: Store, state, **fields) -> StoredPicture:
    folder = gallery.gallery_dir(state)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "p.png").write_bytes(b"png")
    picture_id = add_picture(store, "a red boat", file="p.png", seed=1234, theme="sea", negative_prompt="fog",
                             **fields)
    return store.picture(picture_id)


def test_more_like_this_queues_a_variation_and_is_the_strongest_like(tmp_path, store):
    picture = _picture(store, tmp_path)
    store.rate(picture.id, "thumb", -1)  # disliked before: asking for more of it says otherwise
    prompt_id, strength = rules.queue_variation(make_config(tmp_path), store, tmp_path, picture, "0.4")
    queued = store.queued_prompt(prompt_id)
    assert (queued.prompt, queued.negative_prompt, queued.seed, queued.source_picture_id, queued.strength) == \
        ("a red boat", "fog", 1234, picture.id, 0.4) and strength == 0.4
    rated = store.picture(picture.id)
    assert (rated.rating_kind, rated.rating_value, rated.favourite) == ("stars", 5, True)
    store.remove_prompt(prompt_id)  # the night's taste history (a job from themes) sees the strong like
    job = build_job(RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path), 1, "night")
    rating = to_rating(next(h for h in job.history if h.id == picture.id))
    assert rating.value == 5 and rating_class(rating.value) == "liked"  # the top of the scale


# the night's job ------------------------------------------------------------------------------------

def test_the_first_queued_prompt_carries_its_settings_and_seed(tmp_path, store):
    later = store.queue_prompt("later")
    first = store.queue_prompt("first", steps=9, sampler="ddim", guidance=4.0, seed=99, width=128, height=64)
    store.move_prompt(first, 1)
    ctx = RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path)
    job = build_job(ctx, 1, "night")
    assert (job.choice.prompt, job.choice.prompt_id, job.seed) == ("first", first, 99)
    assert job.settings == PromptSettings(steps=9, sampler="ddim", guidance=4.0, width=128, height=64)
    assert RenderJob.from_json(job.to_json()) == job  # through job.json
    store.remove_prompt(first)
    plain = build_job(ctx, 2, "night")
    assert plain.choice.prompt_id == later and plain.settings.empty and "settings" not in plain.to_json()


def test_a_variation_job_carries_its_picture_and_strength(tmp_path, store):
    picture = _picture(store, tmp_path)
    prompt_id, _ = rules.queue_variation(make_config(tmp_path), store, tmp_path, picture, 0.7)
    job = build_job(RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path), 1, "night")
    assert job.variation.image == gallery.picture_path(tmp_path, "p.png")
    assert (job.variation.strength, job.variation.picture_id, job.seed) == (0.7, picture.id, 1234)
    assert job.choice.why.method == "variation" and job.choice.prompt_id == prompt_id
    assert RenderJob.from_json(job.to_json()) == job


def test_a_variation_whose_picture_is_gone_waits_and_the_next_prompt_paints(tmp_path, store):
    picture = _picture(store, tmp_path)
    rules.queue_variation(make_config(tmp_path), store, tmp_path, picture, 0.5)
    plain = store.queue_prompt("a plain one")
    gallery.picture_path(tmp_path, "p.png").unlink()
    job = build_job(RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path), 1, "night")
    assert job.choice.prompt_id == plain and job.variation is None
    assert len(store.queued_prompts()) == 2  # nothing lost
