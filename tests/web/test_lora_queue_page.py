"""The queue page lists the LoRAs found (a button adds the tag) and refuses an unknown <lora:NAME>."""

from __future__ import annotations

from tests.lora_files import non_finite_lora, nowhere_lora
from tests.web.conftest import csrf_from


def test_queue_page_lists_loras_and_checks_tags(owner, store, state_dir):
    (state_dir / "loras").mkdir()
    nowhere_lora(state_dir / "loras" / "woodcut.safetensors")
    non_finite_lora(state_dir / "loras" / "black.safetensors")
    (state_dir / "loras" / "junk.safetensors").write_bytes(b"not a LoRA")
    page = owner.get("/queue").get_data(as_text=True)
    assert 'data-lora-tag="&lt;lora:woodcut:1&gt;"' in page
    assert "lora:junk" not in page  # item 10: a file without a LoRA's header is not offered
    refused = owner.post("/queue", data={"prompt": "a barn <lora:nope:0.5>", "csrf_token": csrf_from(page)})
    assert refused.status_code == 400
    assert "unknown LoRA" in refused.get_data(as_text=True) and not store.queued_prompts()
    page = owner.get("/queue").get_data(as_text=True)
    queued = owner.post("/queue", data={"prompt": "a barn <lora:woodcut:0.5>", "csrf_token": csrf_from(page)})
    assert queued.status_code == 303
    assert store.queued_prompts()[0].prompt == "a barn <lora:woodcut:0.5>"
    page = owner.get("/queue").get_data(as_text=True)
    assert "Queued for the next night. Note: LoRA woodcut matched 0 layers of this model" in page  # item 10
    refused = owner.post("/queue", data={"prompt": "a barn <lora:black>", "csrf_token": csrf_from(page)})
    assert refused.status_code == 400 and "NaN or infinite" in refused.get_data(as_text=True)  # item 8
    assert len(store.queued_prompts()) == 1


def test_picture_details_say_what_each_lora_did(owner, store):
    """Issue 40 items 4 and 10: a LoRA that matched no layer, or was left out, is not shown as applied."""
    picture = store.add_picture(file="new.png", prompt="a barn <lora:woodcut:0.5> <lora:nowhere> <lora:bad:1>", seed=3,
                                why={"method": "queue", "sentence": "you queued this prompt",
                                     "loras": {"woodcut": "matched 3 layers", "nowhere": "matched 0 layers",
                                               "bad": "not applied: bad.safetensors holds NaN or infinite values"}})
    page = owner.get(f"/pictures/{picture}").get_data(as_text=True)
    assert ("<dt>LoRAs</dt><dd>&lt;lora:woodcut:0.5&gt; (matched 3 layers) &lt;lora:nowhere&gt; (matched 0 layers) "
            "&lt;lora:bad:1&gt; (not applied: bad.safetensors holds NaN or infinite values)</dd>") in page
    assert "<dt>loras</dt>" not in page  # the mapping is not repeated among the choice's facts
