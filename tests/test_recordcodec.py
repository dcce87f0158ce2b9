"""The record codec (issue 43 item 3): one declaration encodes and decodes a record, and a record
read from a file or a pipe is checked — every refusal names the record and the field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from frame.recordcodec import Record, RecordError, decode, encode, wire
from frame.worker.events import ShowOutput, parse_event
from frame.worker.records import JobUnreadable, RenderJob, job_from_json


@dataclass(frozen=True)
class Inner(Record):
    name: str
    size: int = 0


@dataclass(frozen=True)
class Outer(Record):
    title: str
    where: Path
    label: str = wire(absent="none", or_default=True, key="the-label")
    kind: Literal["a", "b"] = "a"
    weight: float = wire(1.0, convert=float)
    note: str | None = wire(None, omit_none=True)
    inner: Inner | None = None
    items: tuple[Inner, ...] = wire((), max_items=3)
    pair: tuple[str, int] | None = None
    extra: Mapping[str, float] = field(default_factory=dict)
    plain: Any = None
    tags: tuple[str, ...] = wire((), omit_default=True)

    WIRE_ORDER = ("kind", "title", "where", "weight", "label", "note", "inner", "items", "pair", "extra", "plain",
                  "tags")


FULL = Outer(title="t", where=Path("/x/y"), kind="b", weight=2.5, label="l", note="n", inner=Inner("i", 3),
             items=(Inner("a"), Inner("b", 2)), pair=("p", 1), extra={"k": 0.5}, plain={"any": [1]}, tags=("x",))


def test_a_record_round_trips_through_json_text():
    text = json.dumps(FULL.to_json())
    assert Outer.from_json(json.loads(text)) == FULL
    assert list(json.loads(text)) == ["kind", "title", "where", "weight", "the-label", "note", "inner", "items",
                                      "pair", "extra", "plain", "tags"]


def test_wire_details_keys_left_out_and_defaults():
    data = encode(Outer(title="t", where=Path("/p"), label="none"))
    assert "note" not in data and "tags" not in data and data["the-label"] == "none" and "label" not in data
    back = decode(Outer, {"title": "t", "where": "/p", "the-label": "", "weight": 2, "unknown": 1})
    assert back.label == "none" and back.weight == 2.0 and isinstance(back.weight, float)


@pytest.mark.parametrize(("data", "named"), [
    ({"where": "/p"}, "Outer.title: required, missing"),
    ({"title": 5, "where": "/p"}, "Outer.title: expected str"),
    ({"title": "t", "where": 3}, "Outer.where: expected a path"),
    ({"title": "t", "where": "/p", "kind": "c"}, "Outer.kind"),
    ({"title": "t", "where": "/p", "weight": "1.5"}, "Outer.weight: expected a number"),
    ({"title": "t", "where": "/p", "weight": True}, "Outer.weight: expected a number"),
    ({"title": "t", "where": "/p", "inner": {"size": 1}}, "Inner.name: required, missing"),
    ({"title": "t", "where": "/p", "inner": {"name": "n", "size": True}}, "Inner.size: expected int"),
    ({"title": "t", "where": "/p", "items": [{"name": "a"}] * 4}, "Outer.items: 4 items, more than 3"),
    ({"title": "t", "where": "/p", "items": {"name": "a"}}, "Outer.items: expected a list"),
    ({"title": "t", "where": "/p", "items": ["a"]}, "Inner: not a JSON object"),
    ({"title": "t", "where": "/p", "pair": ["p"]}, "Outer.pair: expected 2 items"),
    ({"title": "t", "where": "/p", "extra": {"k": "v"}}, "Outer.extra.k: expected a number"),
    ({"title": "t", "where": "/p", "extra": []}, "Outer.extra: expected an object"),
    ([1, 2], "Outer: not a JSON object"),
])
def test_each_refusal_names_the_record_and_the_field(data, named):
    with pytest.raises(RecordError, match=named.replace("(", r"\(")):
        decode(Outer, data)


def test_hostile_values_are_data_never_code():
    """A type name, a callable's path or an expression in the data stays a string or is refused."""
    with pytest.raises(RecordError, match="Outer.kind"):
        decode(Outer, {"title": "t", "where": "/p", "kind": "__import__('os').system('false')"})
    record = decode(Outer, {"title": "os.system", "where": "/p", "plain": {"__class__": "builtins.eval"}})
    assert record.title == "os.system" and record.plain == {"__class__": "builtins.eval"}


def test_a_job_with_a_wrong_type_is_unreadable_and_says_which_field():
    job = {"kind": "render", "state_dir": "/s", "seed": 1, "candidates": [{"prompt": ["not", "text"]}]}
    with pytest.raises(JobUnreadable, match=r"JobCandidate\.prompt: expected str"):
        job_from_json(job)
    with pytest.raises(JobUnreadable, match=r"RenderJob\.seed: expected int"):
        job_from_json({"kind": "render", "state_dir": "/s", "seed": "1; rm -rf /"})
    assert isinstance(job_from_json({"kind": "render", "state_dir": "/s", "seed": 1}), RenderJob)


def test_an_event_with_a_wrong_type_is_not_an_event():
    assert parse_event('{"event": "progress", "step": "3", "steps": 4}') is None
    assert parse_event('{"event": "progress", "step": 3, "steps": 4}').step == 3
    assert ShowOutput.from_json({"status": None}).status == "shown"
    with pytest.raises(RecordError, match="ShowOutput.status"):
        ShowOutput.from_json({"status": "exploded"})


def test_a_short_job_or_answer_with_a_wrong_type_is_refused_naming_the_field():
    from frame.worker.shortjobs import child_job_from_json, child_output_from_json, parse_answer

    limits = {"max_pixels": 10, "decode_bytes": 20, "cap_mb": 30}
    with pytest.raises(ValueError, match=r"ImageLimits\.cap_mb: expected int"):
        child_job_from_json({"kind": "photo", "out": "/o", "limits": {**limits, "cap_mb": "30"},
                             "max_side": 1, "jpeg_quality": 90})
    with pytest.raises(ValueError, match=r"CheckJob\.what"):
        child_job_from_json({"kind": "check", "config": "/c", "what": "eval", "cap_mb": 5})
    with pytest.raises(ValueError, match=r"ThumbsOutput\.made\[0\]: expected a path"):
        child_output_from_json({"kind": "thumbs", "made": [{"x": 1}], "failed": []})
    assert parse_answer('{"event": "done", "result": {"kind": "thumbs", "made": [7], "failed": []}}') is None


@dataclass(frozen=True)
class Row:
    """A row-like record: a flag written as 0/1, a mapping written as its JSON text, a column not shown."""

    name: str
    secret: str
    flag: bool = wire(False, dump=int)
    counts: Mapping[str, int] | None = wire(None, dump=lambda value: json.dumps(value) if value else None)
    note: str | None = wire(None, omit_none=True, dump=str.upper)

    WIRE_ORDER = ("flag", "name", "counts", "note")


def test_dump_writes_another_form_and_wire_order_leaves_a_field_out():
    assert encode(Row("r", "s", flag=True, counts={"a": 1}, note="n")) == {
        "flag": 1, "name": "r", "counts": '{"a": 1}', "note": "N"}
    data = encode(Row("r", "s"))
    assert data == {"flag": 0, "name": "r", "counts": None} and list(data) == ["flag", "name", "counts"]
    assert "secret" not in encode(Row("r", "s", counts={}))
