"""Queue management on the JSON API and ``frame queue`` (issue 16): list, add with settings, edit,
move, remove; "reuse seed" and "more like this" of a picture."""

from __future__ import annotations

import argparse

import pytest

from frame.cli import daemon as commands
from frame.daemon.http.app import create_app
from frame.daemon.store import gallery
from frame.errors import UsageError
from tests.daemon.conftest import add_picture, make_config

TOKEN = "owner-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(config, store, tmp_path):
    return create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()


@pytest.fixture
def picture(store, tmp_path):
    folder = gallery.gallery_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / "p.png").write_bytes(b"png")
    return add_picture(store, "a red boat", file="p.png", seed=31337, theme="sea", negative_prompt="fog")


def _ids(client):
    return [p["id"] for p in client.get("/api/prompts", headers=AUTH).get_json()["prompts"]]


def test_add_with_settings_edit_move_remove(client, store):
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox", "steps": 12, "sampler": "ddim",
                                                             "guidance": 5, "seed": -1, "size": "768x512"})
    assert answer.status_code == 201
    first = answer.get_json()["id"]
    listed = client.get("/api/prompts", headers=AUTH).get_json()["prompts"][0]
    assert (listed["steps"], listed["sampler"], listed["guidance"], listed["seed"], listed["width"],
            listed["height"]) == (12, "ddim", 5.0, None, 768, 512)
    second = client.post("/api/prompts", headers=AUTH, json={"prompt": "a whale"}).get_json()["id"]
    edited = client.patch(f"/api/prompts/{first}", headers=AUTH, json={"prompt": "a grey fox", "steps": None,
                                                                       "seed": 9})
    assert edited.status_code == 200
    assert (edited.get_json()["prompt"], edited.get_json()["steps"], edited.get_json()["seed"],
            edited.get_json()["sampler"]) == ("a grey fox", None, 9, "ddim")
    moved = client.post(f"/api/prompts/{second}/move", headers=AUTH, json={"position": 1})
    assert [p["id"] for p in moved.get_json()["prompts"]] == [second, first] == _ids(client)
    assert client.delete(f"/api/prompts/{second}", headers=AUTH).status_code == 200
    assert _ids(client) == [first]


@pytest.mark.parametrize(("method", "path", "body", "status", "said"), [
    ("post", "/api/prompts", {"prompt": "x", "steps": 0}, 400, "steps must be from 1"),
    ("post", "/api/prompts", {"prompt": "x", "size": "500x500"}, 400, "size 500x500 is not allowed"),
    ("post", "/api/prompts", {"prompt": "x", "sampler": "heun"}, 400, "sampler must be one of"),
    ("post", "/api/prompts", {"prompt": "x", "strength": 0.5}, 400, "strength is for a variation"),
    ("patch", "/api/prompts/1", {"prompt": ""}, 400, "prompt must not be empty"),
    ("patch", "/api/prompts/99", {"steps": 3}, 404, "no queued prompt with id 99"),
    ("delete", "/api/prompts/99", None, 404, "no queued prompt"),
    ("post", "/api/prompts/1/move", {"position": 3}, 400, "position must be from 1 to 1"),
    ("post", "/api/prompts/1/move", {"to": 1}, 400, '{"position": N}'),
])
def test_bad_requests_change_nothing(client, store, method, path, body, status, said):
    store.queue_prompt("kept", steps=4)
    before = store.queued_prompts()
    answer = getattr(client, method)(path, headers=AUTH, json=body)
    assert answer.status_code == status and said in answer.get_json()["error"]
    assert store.queued_prompts() == before


def test_changes_need_the_token(client, store):
    prompt_id = store.queue_prompt("kept")
    assert client.delete(f"/api/prompts/{prompt_id}").status_code == 401
    assert client.post(f"/api/prompts/{prompt_id}/move", json={"position": 1}).status_code == 401
    assert client.patch(f"/api/prompts/{prompt_id}", json={"steps": 3}).status_code == 401
    assert [p.prompt for p in store.queued_prompts()] == ["kept"]


def test_reuse_seed_queues_the_same_prompt_and_seed(client, store, picture):
    answer = client.post(f"/api/pictures/{picture}/reuse-seed", headers=AUTH)
    assert answer.status_code == 201
    queued = store.queued_prompts()[0]
    assert (queued.prompt, queued.negative_prompt, queued.theme, queued.seed, queued.source_picture_id) == \
        ("a red boat", "fog", "sea", 31337, None)


def test_reuse_seed_reuses_the_pictures_steps_size_sampler_and_guidance(client, store):
    """Issue 29 item 16: the seed alone under tonight's settings paints a different picture."""
    painted = add_picture(store, "a red boat", seed=7, steps=12, sampler="ddim", guidance=5.5, width=768,
                          height=512)
    answer = client.post(f"/api/pictures/{painted}/reuse-seed", headers=AUTH)
    assert answer.status_code == 201
    assert {k: answer.get_json()[k] for k in ("seed", "steps", "sampler", "guidance", "width", "height")} == \
        {"seed": 7, "steps": 12, "sampler": "ddim", "guidance": 5.5, "width": 768, "height": 512}
    queued = store.queued_prompts()[0]
    assert (queued.seed, queued.steps, queued.sampler, queued.guidance, queued.width, queued.height) == \
        (7, 12, "ddim", 5.5, 768, 512)
    remote = add_picture(store, "a blue boat", seed=8, steps=20, sampler="Euler a", width=512, height=512)
    client.post(f"/api/pictures/{remote}/reuse-seed", headers=AUTH)  # a render server's sampler name
    queued = store.queued_prompts()[1]
    assert (queued.seed, queued.steps, queued.sampler, queued.width) == (8, 20, None, 512)
    upload = add_picture(store, "the garden", origin="upload", seed=None)
    refused = client.post(f"/api/pictures/{upload}/reuse-seed", headers=AUTH)
    assert refused.status_code == 422 and "seed" in refused.get_json()["error"]


def test_more_like_this_queues_a_variation(client, store, picture):
    answer = client.post(f"/api/pictures/{picture}/variation", headers=AUTH, json={"strength": 0.35})
    assert answer.status_code == 201 and answer.get_json()["strength"] == 0.35
    queued = store.queued_prompts()[0]
    assert (queued.source_picture_id, queued.strength, queued.seed) == (picture, 0.35, 31337)
    assert client.get(f"/api/pictures/{picture}", headers=AUTH).get_json()["rating_value"] == 5
    edited = client.patch(f"/api/prompts/{queued.id}", headers=AUTH, json={"strength": 0.8})
    assert edited.get_json()["strength"] == 0.8
    bad = client.post(f"/api/pictures/{picture}/variation", headers=AUTH, json={"strength": 0.9})
    assert bad.status_code == 400 and "strength must be from 0.3 to 0.8" in bad.get_json()["error"]


def test_more_like_this_without_a_vae_encoder_is_refused_when_asked(tmp_path, store, picture):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model_index.json").write_text("{}")
    config = make_config(tmp_path, model={"source": str(folder)})
    client = create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()
    answer = client.post(f"/api/pictures/{picture}/variation", headers=AUTH, json={})
    assert answer.status_code == 422 and "vae_encoder/model.onnx" in answer.get_json()["error"]
    assert store.queued_prompts() == []


# frame queue, its requests answered by the API app -------------------------------------------------

class AppClient:
    """``frame.cli.client.Client`` against the Flask test client (the daemon process: test_commands)."""

    def __init__(self, test_client) -> None:
        self.test_client = test_client

    def request(self, method, path, body=None):
        answer = self.test_client.open(path, method=method, json=body, headers=AUTH)
        if answer.status_code >= 400:
            raise UsageError(f"the daemon said: {answer.get_json()['error']}")
        return answer.get_json()


def _frame_queue(monkeypatch, client, capsys, *argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")
    commands.register(parser.add_subparsers())
    monkeypatch.setattr(commands, "_client", lambda config: AppClient(client))
    monkeypatch.setattr(commands, "_config", lambda args: None)
    args = parser.parse_args(["queue", *argv])
    assert args.func(args) == 0
    return capsys.readouterr().out.splitlines()


def test_frame_queue_list_move_edit_remove(monkeypatch, client, store, capsys):
    assert _frame_queue(monkeypatch, client, capsys, "--list") == [
        "nothing queued: the next nights paint from your themes and feeds"]
    assert _frame_queue(monkeypatch, client, capsys, "a fox", "--steps", "12", "--seed", "7",
                        "--size", "768x512") == ["queued prompt 1: a fox"]
    _frame_queue(monkeypatch, client, capsys, "a whale")
    assert _frame_queue(monkeypatch, client, capsys, "--list") == [
        "1. #1 a fox  [steps 12, seed 7, size 768x512]", "2. #2 a whale"]
    assert _frame_queue(monkeypatch, client, capsys, "--move", "2", "1")[1:] == [
        "1. #2 a whale", "2. #1 a fox  [steps 12, seed 7, size 768x512]"]
    assert _frame_queue(monkeypatch, client, capsys, "--edit", "1", "--steps", "", "--sampler", "ddim") == [
        "edited: 2. #1 a fox  [sampler ddim, seed 7, size 768x512]"]  # second since the move (it said 1.)
    assert _frame_queue(monkeypatch, client, capsys, "--remove", "2") == ["removed prompt 2 from the queue"]
    assert [p.prompt for p in store.queued_prompts()] == ["a fox"]


def test_frame_queue_says_what_is_missing(monkeypatch, client, capsys):
    with pytest.raises(UsageError, match="give a prompt to add"):
        _frame_queue(monkeypatch, client, capsys)
    with pytest.raises(UsageError, match="say what to change"):
        _frame_queue(monkeypatch, client, capsys, "--edit", "1")
    _frame_queue(monkeypatch, client, capsys, "a", "--seed", "3")
    with pytest.raises(UsageError, match="position must be from 1 to 1"):
        _frame_queue(monkeypatch, client, capsys, "--move", "1", "5")


def test_one_size_rule_the_models_and_every_problem_at_once(client, store):
    """Issue 29 item 17: the queue refused the demo's own 672x400 ("multiples of 64") while the settings
    said 8 and the model 16, capped steps at 150 against the model's 1000, and named one bad field per
    try. Now the configured model's rule decides, and one answer names every bad field."""
    demo_size = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox", "size": "672x400",
                                                                "steps": 400})
    assert demo_size.status_code == 201, demo_size.get_json()
    assert (store.queued_prompts()[0].width, store.queued_prompts()[0].steps) == (672, 400)
    refused = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox", "steps": 0, "sampler": "heun",
                                                              "size": "500x500"})
    assert refused.status_code == 400
    error = refused.get_json()["error"]
    assert "steps must be from 1 to 1000" in error and "sampler must be one of" in error
    assert "multiples of 16 pixels for this SD 1.5 model (e.g. 496x496)" in error
    assert len(store.queued_prompts()) == 1
    prompt_id = store.queued_prompts()[0].id
    edit = client.patch(f"/api/prompts/{prompt_id}", headers=AUTH, json={"size": "680x400"})
    assert edit.status_code == 400 and "multiples of 16 pixels" in edit.get_json()["error"]
    lcm = client.patch(f"/api/prompts/{prompt_id}", headers=AUTH, json={"sampler": "lcm"})  # its 400 steps
    assert lcm.status_code == 400 and "lcm: steps must be between 1 and original_inference_steps=50, got 400" \
        in lcm.get_json()["error"]


def test_a_model_behind_a_url_is_not_opened_by_the_queue(tmp_path, store):
    config = make_config(tmp_path, model={"source": "http://nas.local/models/sd15"})
    client = create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()
    assert client.post("/api/prompts", headers=AUTH, json={"prompt": "x", "size": "768x512"}).status_code == 201
    refused = client.post("/api/prompts", headers=AUTH, json={"prompt": "x", "size": "500x500"})
    assert refused.status_code == 400 and "multiples of 8 pixels" in refused.get_json()["error"]


def test_a_saved_configuration_reaches_the_queues_checks(config, store, tmp_path):
    """After the owner saves settings, the API checks a queued prompt against the new configuration
    (model rules, LoRA folders), not the one the daemon started with."""
    from dataclasses import replace

    from frame.daemon.http.api import API_KEY
    from frame.daemon.http.app import update_config

    app = create_app(config, store, token=TOKEN, state_dir=tmp_path)
    saved = replace(config, model=replace(config.model, steps=7))
    update_config(app, saved)
    assert app.extensions[API_KEY].config is saved
