"""The queue page lists the LoRAs found (a button adds the tag) and refuses an unknown <lora:NAME>."""

from __future__ import annotations

from tests.web.conftest import csrf_from


def test_queue_page_lists_loras_and_checks_tags(owner, store, state_dir):
    (state_dir / "loras").mkdir()
    (state_dir / "loras" / "woodcut.safetensors").write_bytes(b"")
    page = owner.get("/queue").get_data(as_text=True)
    assert 'data-lora-tag="&lt;lora:woodcut:1&gt;"' in page
    refused = owner.post("/queue", data={"prompt": "a barn <lora:nope:0.5>", "csrf_token": csrf_from(page)})
    assert refused.status_code == 400
    assert "unknown LoRA" in refused.get_data(as_text=True) and not store.queued_prompts()
    page = owner.get("/queue").get_data(as_text=True)
    queued = owner.post("/queue", data={"prompt": "a barn <lora:woodcut:0.5>", "csrf_token": csrf_from(page)})
    assert queued.status_code == 303
    assert store.queued_prompts()[0].prompt == "a barn <lora:woodcut:0.5>"
