"""A queued prompt whose LoRA or embedding file is broken no longer blocks the queue (issue 40 item 4):
through the real worker on the bundled demo model, the bad file is left out with a warning, the
night paints the prompt, it leaves the queue, and the good prompt behind it paints the next night.
The picture's details say what became of each LoRA ("not applied: …", "matched 0 layers", item 10)."""

from __future__ import annotations

import pytest

from frame.daemon.jobs import night
from frame.daemon.store.records import StoredPicture
from tests.daemon.conftest import make_config
from tests.lora_files import demo_lora, malformed_lora, non_finite_lora, nowhere_lora


@pytest.fixture
def ctx(tmp_path, store):
    config = make_config(tmp_path, display={"panel": "virtual", "size": "80x48", "min_refresh_seconds": 0},
                         model={"source": "demo", "size": "64x64", "steps": 1})
    (tmp_path / "loras").mkdir()
    return night.RenderContext(config, store, tmp_path)


def _paint(ctx) -> StoredPicture:
    render_id = ctx.store.start_render("night", None)
    outcome, picture_id = night.render(ctx, render_id, "night")
    assert outcome.status == "done", outcome.error
    return ctx.store.picture(picture_id)


def test_a_broken_lora_is_left_out_and_the_queue_moves_on(ctx, tmp_path):
    folder = tmp_path / "loras"
    (folder / "garbage.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    non_finite_lora(folder / "black.safetensors")
    malformed_lora(folder / "flat.safetensors", "rank_zero")
    nowhere_lora(folder / "nowhere.safetensors")
    demo_lora(folder / "good.safetensors")
    embeddings = tmp_path / "embeddings"
    embeddings.mkdir()
    (embeddings / "badword.pt").write_bytes(b"PK\x03\x04 not a zip")
    bad = ctx.store.queue_prompt("a fox badword <lora:garbage:1> <lora:black:0.8> <lora:flat> <lora:nowhere> "
                                 "<lora:good:0.5>")
    good = ctx.store.queue_prompt("a red boat")

    first = _paint(ctx)
    assert first.prompt.startswith("a fox badword") and ctx.store.queued_prompt(bad) is None
    notes = first.why["loras"]
    assert notes["good"] == "matched 3 layers"
    assert notes["nowhere"] == "matched 0 layers"
    for name in ("garbage", "black", "flat"):
        assert notes[name].startswith("not applied: ") and f"{name}.safetensors" in notes[name], notes[name]
    assert "NaN or infinite" in notes["black"]

    second = _paint(ctx)
    assert second.prompt == "a red boat" and ctx.store.queued_prompt(good) is None
    assert "loras" not in second.why
