"""Issue 40, item 13: a bidi override (or any control character) in a file name reaches no page as it is.

A LoRA named ``woodcut\u202egpj.safetensors`` would read ``woodcutjpg.safetensors`` turned around; every
page that prints a name (the folders' listings, the state folder, the configuration) shows the character
as its code point instead (``frame.web.shown_text``).
"""

from __future__ import annotations

import pytest

from frame.config import Config, WebConfig
from frame.daemon.store.database import Store
from frame.web.shown_text import finalize, neutralise
from tests.lora_files import demo_lora
from tests.web.conftest import TOKEN, login, make_app, seed

RLO = "\u202e"
ODD = ("\u202e", "\u2066", "\u200f", "\x1b", "\x00", "\u200b", "\ufeff", "\ue000")


@pytest.mark.parametrize("char", ODD)
def test_each_refused_character_is_shown_as_its_code_point(char):
    assert neutralise(f"a{char}b") == f"a[U+{ord(char):04X}]b"


def test_text_real_scripts_need_is_kept():
    for text in ("line\tone\nline two", "👨\u200d👩\u200d👧", "می\u200cخواهم", "שלום", "plain"):
        assert neutralise(text) == text


def test_markup_stays_markup():
    from markupsafe import Markup

    shown = finalize(Markup(f"<b>x{RLO}y</b>"))
    assert isinstance(shown, Markup) and shown == Markup("<b>x[U+202E]y</b>")
    assert finalize(None) is None and finalize(3) == 3


def odd_state(tmp_path):
    state_dir = tmp_path / f"state{RLO}gpj"
    state_dir.mkdir()
    for name in (f"loras/wood{RLO}gpj.safetensors", f"embeddings/ink{RLO}gpj.pt"):
        (state_dir / name).parent.mkdir(exist_ok=True)
        (state_dir / name).write_bytes(b"")
    demo_lora(state_dir / f"loras/wood{RLO}gpj.safetensors")  # listed only with a LoRA's header
    return state_dir


def test_no_page_shows_a_name_turned_around(tmp_path):
    state_dir = odd_state(tmp_path)
    store = Store.open(state_dir)
    try:
        ids = seed(store, state_dir)
        prompt_id = store.queue_prompt("a harbour at dawn")
        config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN))
        client = make_app(store, state_dir, config=config).test_client()
        assert login(client).status_code == 303
        pages = ["/", "/queue", "/status", "/config", "/gallery", f"/pictures/{ids['new']}",
                 f"/pictures/{ids['new']}/delete", f"/queue/{prompt_id}/edit"]
        for path in pages:
            response = client.get(path)
            assert response.status_code == 200, path
            assert RLO not in response.get_data(as_text=True), path
        queue = client.get("/queue").get_data(as_text=True)
        assert "wood[U+202E]gpj" in queue and "ink[U+202E]gpj" in queue
        assert "state[U+202E]gpj" in client.get("/config").get_data(as_text=True)
    finally:
        store.close()
