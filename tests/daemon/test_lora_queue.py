"""``<lora:NAME:SCALE>`` in a queued prompt: kept by the sanitiser (other markup still goes), and a
name with no file in the LoRA folders is refused when the prompt is queued, not at night."""

from __future__ import annotations

import pytest

from frame.config import lora_tags
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.app import create_app
from tests.daemon.conftest import make_config

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
    (tmp_path / "loras" / "ink.safetensors").write_bytes(b"")
    config = make_config(tmp_path)
    return create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()


def test_queue_refuses_unknown_lora_and_keeps_known(client):
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox <lora:nope:0.7>"})
    assert answer.status_code == 400
    assert "unknown LoRA 'nope'" in answer.get_json()["error"] and "found: ink" in answer.get_json()["error"]
    answer = client.post("/api/prompts", headers=AUTH, json={"prompt": "a fox <lora:ink:0.7>"})
    assert answer.status_code == 201
    assert answer.get_json()["prompt"] == "a fox <lora:ink:0.7>"


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
