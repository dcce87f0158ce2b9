"""``<lora:NAME:SCALE>`` in a queued prompt: kept by the sanitiser (other markup still goes), and a
name with no file in the LoRA folders, or a file that cannot be used (malformed, NaN or inf: issue 40
item 8, read in the check child), is refused when the prompt is queued, not at night; a LoRA that
matches no layer of the model is queued with a warning (item 10)."""

from __future__ import annotations

import pytest

from frame.config import lora_tags
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.app import create_app
from tests.daemon.conftest import make_config
from tests.lora_files import demo_lora, malformed_lora, non_finite_lora, nowhere_lora

TOKEN = "owner-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_sanitiser_keeps_lora_tags_and_nothing_else():
    clean = Sanitiser(max_chars=200).clean
    assert clean("a cat <lora:ink:0.8>, woodcut") == "a cat <lora:ink:0.8>, woodcut"
    assert clean("<lora:x onerror=1> hi <b>x</b> <lora:wood_v2.1:-0.5:1>") == "hi x <lora:wood_v2.1:-0.5:1>"
    assert clean("\ue000<lora:ink:1><script>") == "<lora:ink:1>"


@pytest.fixture
def client(store, tmp_path):
    (tmp_path / "loras").mkdir()
    demo_lora(tmp_path / "loras" / "ink.safetensors")
    config = make_config(tmp_path)
    return create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()


def test_queue_refuses_unknown_lora_and_keeps_known(client):
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox <lora:nope:0.7>"})
    assert answer.status_code == 400
    assert "unknown LoRA 'nope'" in answer.get_json()["error"] and "found: ink" in answer.get_json()["error"]
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox <lora:ink:0.7>"})
    assert answer.status_code == 201
    assert answer.get_json()["prompt"] == "a fox <lora:ink:0.7>" and "warnings" not in answer.get_json()


def test_queue_refuses_a_lora_file_that_cannot_be_used(client, tmp_path, store):
    folder = tmp_path / "loras"
    non_finite_lora(folder / "black.safetensors")
    malformed_lora(folder / "flat.safetensors", "rank_zero")
    (folder / "junk.safetensors").write_bytes(b"not a safetensors file")
    for name, why in (("black", "NaN or infinite"), ("flat", "rank 0"), ("junk", "not a safetensors file")):
        answer = client.post("/api/prompts", headers=AUTH,
                             json={"prompt": "a fox", "negative_prompt": f"<lora:{name}>"})
        assert answer.status_code == 400, name
        error = answer.get_json()["error"]
        assert f"{name}.safetensors" in error and why in error and "Error" not in error, error
    assert not store.queued_prompts()


def test_a_lora_that_matches_no_layer_is_queued_with_a_warning(client, tmp_path, store):
    nowhere_lora(tmp_path / "loras" / "nowhere.safetensors")
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox <lora:nowhere:0.7>"})
    assert answer.status_code == 201
    assert answer.get_json()["warnings"] == ["LoRA nowhere matched 0 layers of this model (a LoRA for another "
                                             "model?): the picture will look as without it"]
    edited = client.patch(f"/api/prompts/{answer.get_json()['id']}", headers=AUTH,
                          json={"prompt": "a fox <lora:nowhere:0.5> <lora:ink>"})
    assert edited.status_code == 200 and len(edited.get_json()["warnings"]) == 1


def test_model_loras_entries(tmp_path):
    import dataclasses

    from frame.config.schema import LoraEntry

    config = make_config(tmp_path)
    config = dataclasses.replace(config, model=dataclasses.replace(
        config.model, loras=(LoraEntry("ink", 0.5), LoraEntry("~/styles/wood.safetensors", 1.0))))
    requests = lora_tags.configured_requests(config)
    assert requests[0] == lora_tags.LoraRequest("ink", 0.5)
    assert requests[1].name == "wood" and requests[1].file.endswith("/styles/wood.safetensors")
    assert str(tmp_path / "loras") in lora_tags.configured_folders(config)


def test_night_drops_only_unknown_tags(tmp_path):
    (tmp_path / "ink.safetensors").write_bytes(b"")
    prompt, dropped = lora_tags.drop_unknown("a barn <lora:ink:0.5>, <lora:gone:1> dusk <lora:ink:x>", [str(tmp_path)])
    assert (prompt, dropped) == ("a barn <lora:ink:0.5>, dusk", ["gone", "ink"])
    assert lora_tags.drop_unknown("a barn <lora:ink>", [str(tmp_path)]) == ("a barn <lora:ink>", [])


def test_settings_page_refuses_a_theme_with_an_unknown_lora(tmp_path):
    from frame.config import owner
    from frame.daemon.settings import SettingsEditor

    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nweb:\n  token: test-token-123456\n", encoding="utf-8")
    (tmp_path / "state" / "loras").mkdir(parents=True)
    (tmp_path / "state" / "loras" / "ink.safetensors").write_bytes(b"")
    editor = SettingsEditor(str(path), environ={})
    proposal = editor.propose({"taste.themes": ["a harbour <lora:nope:0.5>", "a forest <lora:ink:0.8>"]})
    assert not proposal.ok
    assert any("unknown LoRA 'nope'" in p for p in proposal.problems["taste.themes"])
    assert not any("'ink'" in p for p in proposal.problems["taste.themes"])
    assert not owner.settings_path(tmp_path / "state").exists()


def test_the_lora_answer_is_kept_while_the_files_stay(client, tmp_path, monkeypatch):
    """The check child reads every value of the files: asked once per set of LoRAs and file versions,
    not once per prompt text."""
    from frame.daemon.jobs import config_checks

    runs = []
    real = config_checks.run_child
    monkeypatch.setattr(config_checks, "run_child",
                        lambda job, **kw: (runs.append(job.what) if job.what == "loras" else None) or real(job, **kw))
    nowhere_lora(tmp_path / "loras" / "nowhere.safetensors")
    for text in ("a fox <lora:nowhere:0.7>", "a boat <lora:nowhere:0.2>, dusk"):
        assert "warnings" in client.post("/api/prompts", headers=AUTH, json={"prompt": text}).get_json()
    assert runs == ["loras"]
    demo_lora(tmp_path / "loras" / "nowhere.safetensors", rank=3)  # replaced: a LoRA for this model now
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox <lora:nowhere>"})
    assert answer.status_code == 201 and "warnings" not in answer.get_json() and runs == ["loras", "loras"]
