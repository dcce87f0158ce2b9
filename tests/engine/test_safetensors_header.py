"""Safetensors headers (``frame.engine.io.safetensors``, checks in ``header_checks``): each malformed
field is one FileFormatError naming the file and the field (before: TypeError, KeyError,
AttributeError, RecursionError or ValueError, and an embedding's render exited 1), and what is legal
but odd (brackets and escaped quotes inside strings, empty tensors, metadata) still reads."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from frame.engine.errors import FileFormatError
from frame.engine.io.header_checks import HeaderLimits
from frame.engine.io.safetensors import read_header


def _file(tmp_path, header, body=b"", raw=None, name="t.safetensors"):
    text = raw if raw is not None else json.dumps(header).encode()
    path = tmp_path / name
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    return path


def _entry(**change):
    return {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16], **change}


@pytest.mark.parametrize(("header", "field", "words"), [
    ([1, 2], "header", "JSON list, not an object"),
    ("text", "header", "JSON str"),
    ({"w": [1]}, "w", "not an object"),
    ({"w": {"dtype": "F32", "shape": [2, 2]}}, "w.data_offsets", "no data_offsets"),
    ({"w": _entry(data_offsets=[0.0, 16.0])}, "w.data_offsets", "not two integers"),
    ({"w": _entry(data_offsets=["0", "16"])}, "w.data_offsets", "not two integers"),
    ({"w": _entry(data_offsets=[0, 16, 32])}, "w.data_offsets", "not two integers"),
    ({"w": _entry(data_offsets=[16, 0])}, "w.data_offsets", "negative or reversed"),
    ({"w": _entry(data_offsets=[0, 1 << 40])}, "w.data_offsets", "reach past the file's 32 data bytes"),
    ({"w": _entry(data_offsets=[0, 12])}, "w.data_offsets", "needs 16 bytes"),
    ({"w": _entry(shape=[-2, -2])}, "w.shape", "non-negative integers"),
    ({"w": _entry(shape=[2.0, 2])}, "w.shape", "non-negative integers"),
    ({"w": _entry(shape=[True, 2])}, "w.shape", "non-negative integers"),
    ({"w": _entry(shape="2x2")}, "w.shape", "non-negative integers"),
    ({"w": _entry(shape=[1] * 9)}, "w.shape", "at most 8"),
    ({"w": _entry(shape=[1 << 62, 1 << 62])}, "w.data_offsets", "needs more bytes"),
    ({"w": _entry(dtype=["F32"])}, "w.dtype", "not a string"),
    ({"w": _entry(dtype="F8_E4M3")}, "w.dtype", "cannot read"),
    ({"a": _entry(), "b": _entry(data_offsets=[8, 24])}, "b.data_offsets", "share bytes"),
    ({"__metadata__": ["a"], "w": _entry()}, "__metadata__", "JSON list"),
    ({"__metadata__": {"alpha": 8}, "w": _entry()}, "__metadata__.alpha", "JSON int, not a string"),
])
def test_each_malformed_field_is_named(tmp_path, header, field, words):
    path = _file(tmp_path, header, bytes(32))
    with pytest.raises(FileFormatError) as caught:
        read_header(path)
    assert str(caught.value).startswith(f"{path}: ") and words in str(caught.value), str(caught.value)
    assert (caught.value.path, caught.value.field) == (str(path), field)


@pytest.mark.parametrize(("raw", "words"), [
    (b"[" * 5000 + b"]" * 5000, "nest deeper than 3"),
    (b'{"w": {"dtype": "F32", "shape": [[[2]]], "data_offsets": [0, 16]}}', "nest deeper than 3"),
    (b'{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}}', "do not match"),
    (b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 16]}}', "not valid JSON"),
    (b'{"w": {"dtype": "F32", "shape": [Infinity, 2], "data_offsets": [0, 16]}}', "non-negative integers"),
    (b'{"w": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 16]}}', "non-negative integers"),
    (b'{"w": \xff}', "not valid JSON"),
])
def test_headers_json_cannot_parse_well_are_refused_before_parsing(tmp_path, raw, words):
    path = _file(tmp_path, None, bytes(16), raw=raw)
    with pytest.raises(FileFormatError, match=words):
        read_header(path)


def test_size_and_count_caps_come_before_the_parse(tmp_path):
    limits = HeaderLimits(max_header_bytes=4096, max_entries=10)
    many = {f"k{i}": _entry(shape=[1], data_offsets=[4 * i, 4 * i + 4]) for i in range(20)}
    with pytest.raises(FileFormatError, match="21 objects"):
        read_header(_file(tmp_path, many, bytes(80)), limits)
    with pytest.raises(FileFormatError, match="more than the 0 MiB"):
        read_header(_file(tmp_path, {"__metadata__": {"m": "x" * 5000}}), limits)
    values = {"__metadata__": {f"m{i}": "" for i in range(200)}}
    with pytest.raises(FileFormatError, match="199 values"):
        read_header(_file(tmp_path, values), HeaderLimits(max_metadata=50))


def test_strings_may_hold_brackets_quotes_and_escapes(tmp_path):
    text = 'a "quoted" [[[[{{{{ \\ \\" ]]]] }'
    header = {"__metadata__": {"ss_tag_frequency": text, "[[[": "\\\\"}, "w[0]{\"}": _entry(),
              "empty": _entry(shape=[0, 4], data_offsets=[16, 16]), "scalar": _entry(shape=[], data_offsets=[16, 20])}
    found = read_header(_file(tmp_path, header, np.arange(5, dtype="<f4").tobytes()))
    assert found.metadata == {"ss_tag_frequency": text, "[[[": "\\\\"}
    assert found.tensors["w[0]{\"}"].read().tolist() == [[0, 1], [2, 3]]
    assert found.tensors["empty"].read().shape == (0, 4) and found.tensors["scalar"].read() == 4
