"""Issue 40 item 20: the estimate card is written for the owner. Its verdict comes first ("Fits: ...,
N MB to spare" or "Does not fit: ..."), the engineer's lines wait behind "Details", and an estimate made
before the settings changed says so (``frame.config.estimate_inputs``)."""

from __future__ import annotations

import dataclasses

import pytest

from frame.cli.program import main
from frame.config import estimate_inputs, load_config
from frame.web.settings import estimate_verdict
from tests.web.conftest import TOKEN, login, make_app

MIB = 1 << 20


@pytest.mark.parametrize(("figures", "fits", "verdict"), [
    ({"peak_bytes": 138 * MIB, "seconds_here": 720, "window_seconds": 21600}, True,
     "Fits: about 12 min of the 6 h 00 min window, and 138 MB of the worker's 440 MB (302 MB to spare)."),
    ({"peak_bytes": 520 * MIB, "seconds_here": 720, "window_seconds": 21600, "memory_limit_bytes": 440 * MIB},
     False, "Does not fit: the night needs 520 MB, 80 MB more than the worker's 440 MB."),
    ({"peak_bytes": 100 * MIB, "seconds_here": 25800, "window_seconds": 21600}, False,
     "Does not fit: it takes about 7 h 10 min, longer than the 6 h 00 min window."),
    ({"peak_bytes": "lots", "seconds_here": 1, "window_seconds": 2}, None, ""),
    ({"peak_bytes": float("nan"), "seconds_here": 1, "window_seconds": 2}, None, ""),
])
def test_the_verdict_in_words(figures, fits, verdict):
    assert estimate_verdict(figures, 440) == {"fits": fits, "verdict": verdict}


def test_a_hostile_inputs_record_is_no_change():
    config = load_config(None)
    assert estimate_inputs.changed_since(None, config) is None
    assert estimate_inputs.changed_since({str(n): "x" for n in range(1000)}, config) is None
    assert estimate_inputs.changed_since({1: 2, "model.steps": 3}, config) == ["model.steps"]


def test_the_card_gives_the_verdict_first_and_says_when_it_is_stale(tmp_path, store, state_dir, pictures):
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {state_dir}\nmodel:\n  source: demo\n  steps: 3\nweb:\n  token: {TOKEN}\n")
    assert main(["--config", str(path), "estimate", "--state-dir", str(state_dir), "--measure-seconds", "0.3"]) == 0
    config = load_config(str(path))
    client = make_app(store, state_dir, config=config).test_client()
    assert login(client).status_code == 303
    page = client.get("/config").get_data(as_text=True)
    card = page[page.index('id="estimate-title"'):]
    assert card.index('id="estimate-verdict"') < card.index("peak memory:"), "the verdict is not first"
    assert "Fits: about" in card and "MB to spare" in card and 'id="estimate-stale"' not in card
    changed = dataclasses.replace(config, model=dataclasses.replace(config.model, steps=5))
    client = make_app(store, state_dir, config=changed).test_client()
    assert login(client).status_code == 303
    card = " ".join(client.get("/config").get_data(as_text=True).split('id="estimate-title"')[1].split())
    assert 'id="estimate-stale"' in card and "The settings changed since this estimate (Steps)" in card
