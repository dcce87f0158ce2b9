"""Issue 40 item 21: the queue form's size hint is the size the night paints, asked of the check child
(``config_checks.night_size``): ``model.size``, or for "auto" the model's area at the panel's aspect."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frame.config import Config
from frame.daemon.jobs import config_checks
from frame.worker.shortjobs import CheckOutput, child_output_from_json


@pytest.mark.parametrize(("model_size", "rotate", "expected"), [
    ("auto", 0, "672x400"), ("auto", 90, "400x656"), ("512x320", 0, "512x320")])
def test_night_size_follows_the_model_and_the_panel(tmp_path, model_size, rotate, expected):
    config = Config(state_dir=str(tmp_path))
    config = replace(config, model=replace(config.model, size=model_size),
                     display=replace(config.display, rotate=rotate))
    assert config_checks.night_size(config, tmp_path) == expected


@pytest.mark.parametrize("answer", ["768x512; rm", "0x400", ["672", "400"], 672, "9" * 8 + "x1"])
def test_a_strange_answer_is_no_size(answer):
    data = dict(CheckOutput(size_rule="r").to_json(), night_size=answer)
    assert child_output_from_json(data).night_size is None
