"""frame/jsonlimits.py: JSON from a server or an owner's file is parsed only within a depth and a count
of values, decided by a scan that builds nothing (issue 40 item 11)."""

from __future__ import annotations

import json

import pytest

from frame import jsonlimits


def test_text_within_the_limits_parses_as_json_does():
    text = '{"a": "[[[[{{{{ ,,,,", "b": [1, 2.5, {"c": "\\"]]]\\\\"}], "d": null}'
    assert jsonlimits.loads(text, max_depth=3, max_values=10) == json.loads(text)
    assert jsonlimits.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text, words", [
    ("[" * 65 + "]" * 65, "nested more than 64 levels deep"),
    ("[" * 50_000 + "]" * 50_000, "nested more than 64 levels deep"),  # json.loads: RecursionError
    ("[" + "{}," * 100_000 + "{}]", "more than 100,000 values"),
    ("[" + "1," * 100_001 + "1]", "more than 100,000 values"),
])
def test_text_past_the_limits_is_refused_before_it_is_parsed(text, words):
    with pytest.raises(jsonlimits.JsonLimitError, match=words):
        jsonlimits.loads(text)


def test_brackets_and_commas_inside_strings_do_not_count():
    text = json.dumps(["[" * 1000 + "," * 200_000])
    assert jsonlimits.loads(text) == json.loads(text)


def test_malformed_text_is_the_parsers_error():
    with pytest.raises(json.JSONDecodeError):
        jsonlimits.loads('{"a": ')
