"""The step times kept from earlier nights (``frame.estimate.step_history``): the store's round trip,
caps and damaged files, and what tonight's step choice makes of steady and noisy histories."""

from __future__ import annotations

import json
import logging

import pytest

from frame.estimate import step_history as history
from frame.estimate.choice import ESTIMATE_MARGIN, choose_steps
from frame.estimate.step_history import MARGIN_FLOOR, Night, learned_step
from frame.statefile import write_json

KEY = history.night_key("demo", (512, 512), "shared", "auto", None, threads=4)


def _nights(*seconds: float) -> list[Night]:
    return [Night(1000.0 + i, s, 20) for i, s in enumerate(seconds)]


def test_a_night_round_trips_as_the_median_of_its_steps(tmp_path):
    kept = history.record(tmp_path, KEY, [9.0, 10.0, 30.0], now=5.0)  # a slow first step is not the night
    assert kept == Night(5.0, 10.0, 3)
    assert history.load(tmp_path) == {KEY: [Night(5.0, 10.0, 3)]}
    history.record(tmp_path, KEY, [11.0], now=6.0)
    assert [n.step_seconds for n in history.load(tmp_path)[KEY]] == [10.0, 11.0]


def test_the_key_names_every_setting_that_changes_a_step():
    other = [history.night_key("demo", (512, 768), "shared", "auto", None, threads=4),
             history.night_key("demo", (512, 512), "sequential", "auto", None, threads=4),
             history.night_key("demo", (512, 512), "shared", "uint8", None, threads=4),
             history.night_key("demo", (512, 512), "shared", "auto", 2, threads=4),
             history.night_key("demo", (512, 512), "shared", "auto", None, threads=2),
             history.night_key("demo", (512, 512), "shared", "auto", None, vae="taesd", threads=4),
             history.night_key("demo", (512, 512), "shared", "auto", None, loras=1, threads=4),
             history.night_key("other", (512, 512), "shared", "auto", None, threads=4)]
    assert len(set(other + [KEY])) == len(other) + 1


def test_caps_keep_the_newest_nights_and_settings(tmp_path):
    for night in range(history.KEEP_NIGHTS + 3):
        history.record(tmp_path, KEY, [float(night + 1)], now=float(night))
    assert [n.step_seconds for n in history.load(tmp_path)[KEY]] == \
        [float(n + 1) for n in range(3, history.KEEP_NIGHTS + 3)]
    for index in range(history.MAX_KEYS + 2):
        history.record(tmp_path, f"model{index}", [1.0], now=100.0 + index)
    table = history.load(tmp_path)
    assert len(table) == history.MAX_KEYS and KEY not in table and "model0" not in table
    assert f"model{history.MAX_KEYS + 1}" in table
    assert history.record(tmp_path, KEY, [float("nan"), -1.0]) is None  # nothing usable: nothing kept


@pytest.mark.parametrize("content", [
    b"{not json", b"x" * (history.MAX_BYTES + 1),
])
def test_a_damaged_file_is_set_aside_and_rebuilt(tmp_path, caplog, content):
    (tmp_path / history.FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert history.load(tmp_path) == {}
    assert any(history.FILE in r.getMessage() for r in caplog.records)
    history.record(tmp_path, KEY, [2.0], now=1.0)
    assert history.load(tmp_path) == {KEY: [Night(1.0, 2.0, 1)]}


@pytest.mark.parametrize("data", [
    {"format": 99, "nights": {}},
    {"format": 1, "nights": []},
    {"format": 1, "nights": {KEY: [{"at": 1.0, "step_seconds": "fast", "steps": 3}]}},
    {"format": 1, "nights": {KEY: [{"at": 1.0, "step_seconds": -2.0, "steps": 3}]}},
    {"format": 1, "nights": {KEY: [{"at": 1.0, "step_seconds": 2.0, "steps": True}]}},
    {"format": 1, "nights": {KEY: [{"at": 1.0, "step_seconds": 1e300, "steps": 3}]}},
    {"format": 1, "nights": {KEY: "many"}},
    {"format": 1, "nights": {f"k{i}": [] for i in range(history.MAX_KEYS + 1)}},
])
def test_wrong_types_are_ignored_with_a_warning(tmp_path, caplog, data):
    write_json(tmp_path / history.FILE, data)
    with caplog.at_level(logging.WARNING):
        assert KEY not in history.load(tmp_path)
    assert any("ignored" in r.getMessage() for r in caplog.records)
    assert history.record(tmp_path, KEY, [3.0], now=2.0) is not None  # the next night rebuilds it
    assert history.load(tmp_path)[KEY] == [Night(2.0, 3.0, 1)]


def test_the_file_is_small_plain_json(tmp_path):
    history.record(tmp_path, KEY, [1.5, 1.5], now=3.0)
    data = json.loads((tmp_path / history.FILE).read_text())["data"]
    assert data == {"format": 1, "nights": {KEY: [{"at": 3.0, "step_seconds": 1.5, "steps": 2}]}}


def test_a_first_night_is_the_estimate_with_the_full_margin():
    learned = learned_step(100.0, [])
    assert (learned.step_seconds, learned.margin, learned.nights, learned.measured) == \
        (100.0, ESTIMATE_MARGIN, 0, None)


def test_a_slower_measurement_is_used_at_once_a_faster_one_blended_in():
    assert learned_step(100.0, _nights(150.0)).step_seconds == 150.0
    assert learned_step(100.0, _nights(70.0)).step_seconds == pytest.approx(90.0)  # a third of the way
    assert learned_step(100.0, _nights(70.0, 70.0, 70.0)).step_seconds == 70.0
    assert learned_step(100.0, _nights(70.0, 72.0)).margin == ESTIMATE_MARGIN  # too few nights to shrink


def test_the_margin_shrinks_only_where_the_nights_are_steady_and_never_below_the_floor():
    steady = learned_step(100.0, _nights(80.0, 80.4, 79.8, 80.1))
    assert steady.margin == MARGIN_FLOOR  # 0.5 % spread: the floor, not less
    somewhat = learned_step(100.0, _nights(80.0, 84.0, 78.0))
    assert somewhat.margin == pytest.approx(2 * 4.0 / 80.0)  # 10 %
    noisy = learned_step(100.0, _nights(80.0, 110.0, 70.0, 95.0))
    assert noisy.margin == ESTIMATE_MARGIN
    one_outlier = learned_step(100.0, _nights(80.0, 80.0, 80.0, 120.0))
    assert one_outlier.margin == ESTIMATE_MARGIN  # a single slow night keeps the full margin


def test_a_steady_history_paints_more_steps_and_still_fits_its_worst_night():
    fixed, available = 600.0, 3500.0
    first = choose_steps(30, 10, fixed, 200.0, available)
    nights = _nights(200.0, 201.0, 199.0, 200.0)
    learned = learned_step(200.0, nights)
    tonight = choose_steps(30, 10, fixed, learned.step_seconds, available, learned.margin, ESTIMATE_MARGIN)
    assert tonight.steps > first.steps and tonight.fits
    worst = max(n.step_seconds for n in nights)
    assert fixed * (1 + ESTIMATE_MARGIN) + tonight.steps * worst <= available


def test_the_learned_margin_with_the_first_nights_margin_chooses_as_before():
    for available in (1000.0, 2700.0, 3500.0, 5000.0, 9000.0):
        old = choose_steps(20, 10, 600.0, 200.0, available)
        same = choose_steps(20, 10, 600.0, 200.0, available, ESTIMATE_MARGIN, ESTIMATE_MARGIN)
        assert (old.steps, old.fits) == (same.steps, same.fits)


def test_a_device_slower_than_the_pi_projection_says_so():
    assert history.slow_sentence(None, 10.0, "Pi") == ""
    assert history.slow_sentence(12.0, 10.0, "Pi") == ""  # within 25 %
    sentence = history.slow_sentence(20.0, 10.0, "Raspberry Pi Zero 2 W")
    assert "2.0 times" in sentence and "Raspberry Pi Zero 2 W" in sentence and "20 s per step" in sentence
