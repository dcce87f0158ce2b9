"""A kept plan file is hostile input (issue 40): whoever can write ``<state_dir>/model-plans`` can write
a valid digest, so a forged file must never run code, never allocate what it asks for, and never be
used: it is refused with a line naming the file and why, and the model is planned again."""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from frame.engine import model as engine_model
from frame.engine import plan_cache, plan_format
from frame.engine.model import load_model

TEXT_ENCODER = (Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sd15" / "model" / "text_encoder"
                / "model.onnx")
OLD_MAGIC = b"frame model plan 1\n"  # the pickled format frame read before issue 40


def _feeds() -> dict[str, np.ndarray]:
    return {"input_ids": np.arange(77, dtype=np.int32)[None] % 50}


def _kept(tmp_path: Path) -> tuple[Path, dict, dict[str, np.ndarray]]:
    """A sound kept plan of the text encoder: (its file, its header, the model's outputs)."""
    plans = tmp_path / "model-plans"
    with load_model(str(TEXT_ENCODER), plans=plans) as m:
        want = m.run(_feeds())
    (entry,) = plans.glob("*.plan")
    body = entry.read_bytes()[len(plan_cache.MAGIC) + plan_cache.DIGEST_BYTES:]
    (length,) = struct.unpack("<I", body[:4])
    return entry, json.loads(body[4:4 + length]), want


def _write(entry: Path, magic: bytes, body: bytes) -> None:
    """What an attacker writes: the magic, a valid digest of the forged body, the body."""
    entry.write_bytes(magic + hashlib.sha256(body).digest() + body)


def _header_bytes(header: dict) -> bytes:
    raw = json.dumps(header, sort_keys=True).encode()
    return struct.pack("<I", len(raw)) + raw


def _data_body(header: dict, tree: bytes, arrays: bytes = b"") -> bytes:
    return _header_bytes(header) + struct.pack("<I", len(tree)) + tree + arrays


class _Run:
    """``__reduce__`` to ``subprocess.Popen`` reached through a name the old unpickler followed
    (``frame.engine.memory`` imports ctypes, ctypes.util imports subprocess): it makes ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def payload(self) -> bytes:
        argv = [sys.executable, "-c", f"open({str(self.marker)!r}, 'w').close()"]
        args = pickle.dumps((argv,), protocol=2)[2:-1]  # the tuple's opcodes, without PROTO and STOP
        name = b"ctypes.util.subprocess.Popen"
        module = b"frame.engine.memory"
        return (b"\x80\x04" + b"\x8c" + bytes([len(module)]) + module + b"\x8c" + bytes([len(name)]) + name
                + b"\x93" + args + b"R.")


def _assert_refused_and_planned_again(entry: Path, want: dict, caplog, monkeypatch, why: str,
                                      marker: Path | None = None) -> None:
    with caplog.at_level(logging.WARNING, logger="frame.engine.plan_cache"):
        with load_model(str(TEXT_ENCODER), plans=entry.parent) as m:
            got = m.run(_feeds())
    assert marker is None or not marker.exists(), "the plan file ran code"
    line = next(r.getMessage() for r in caplog.records if "unusable" in r.getMessage())
    assert entry.name in line and why in line, line
    assert all(got[k].tobytes() == v.tobytes() for k, v in want.items())
    with monkeypatch.context() as patched:  # the entry was written again, sound, and is used
        patched.setattr(engine_model, "read_structure", lambda *a, **k: pytest.fail("planned again"))
        with load_model(str(TEXT_ENCODER), plans=entry.parent) as m:
            assert all(m.run(_feeds())[k].tobytes() == v.tobytes() for k, v in want.items())


@pytest.mark.parametrize("layout", ["pickled format", "current format"])
def test_a_forged_pickle_never_runs_and_the_model_is_planned_again(tmp_path, caplog, monkeypatch, layout):
    entry, header, want = _kept(tmp_path)
    marker = tmp_path / "ran"
    evil = _Run(marker).payload()
    if layout == "pickled format":  # the layout frame read before: the pickle right after the header
        _write(entry, OLD_MAGIC, _header_bytes(header) + evil)
        why = "old pickled plan"
    else:  # the pickle where the data tree belongs
        _write(entry, plan_cache.MAGIC, _data_body(header, evil))
        why = "not JSON"
    _assert_refused_and_planned_again(entry, want, caplog, monkeypatch, why, marker)
    pickle.loads(evil).wait()  # the same bytes, unpickled, do run: the test's payload is live
    assert marker.exists()


def test_a_plain_os_system_pickle_never_runs(tmp_path, caplog, monkeypatch):
    import os

    entry, header, want = _kept(tmp_path)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    _write(entry, OLD_MAGIC, _header_bytes(header) + pickle.dumps(Evil()))
    _assert_refused_and_planned_again(entry, want, caplog, monkeypatch, "old pickled plan", marker)


HOSTILE_TREES = {
    "a function by name": (b'["f","os.system"]', "no fused kernel"),
    "an op that is not registered": (b'["K","","system",1]', "no registered kernel"),
    "a class by name": (b'["R","subprocess.Popen","x"]', "unknown record"),
    "a JSON object": (b'{"__class__":"os.system"}', "JSON object"),
    "50,000 levels of nesting": (b'["L",' * 50_000 + b"1" + b"]" * 50_000, "not JSON"),
    "300 levels of lists": (b'["L",' * 300 + b"1" + b"]" * 300, "nested deeper"),
    "an object array": (b'["A","|O",[1],0]', "dtype '|O' is not allowed"),
    "a terabyte array": (b'["A","<f4",[1000000,1000000],0]', "outside the file"),
    "a record with a field of the wrong type": (
        b'["R","TensorInfo",["L"],null,null]', "TensorInfo.name is a list"),
    "a reference ahead": (b'["L",["@",5]]', "not defined before it"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_TREES))
def test_a_forged_data_tree_is_refused_by_name(tmp_path, caplog, monkeypatch, case):
    entry, header, want = _kept(tmp_path)
    tree, why = HOSTILE_TREES[case]
    _write(entry, plan_cache.MAGIC, _data_body(header, tree))
    _assert_refused_and_planned_again(entry, want, caplog, monkeypatch, why)


@pytest.mark.parametrize("target", ["outside", "unchecked"])
def test_a_plan_pointing_weights_at_another_file_is_refused(tmp_path, caplog, monkeypatch, target):
    entry, header, want = _kept(tmp_path)
    other = tmp_path / "secret"
    other.write_bytes(b"x" * 1_000_000)
    if target == "unchecked":  # a file inside the model's folder the header does not vouch for
        other = TEXT_ENCODER.parent / "config.json"
    attention = engine_model.AttentionConfig()
    planned = engine_model.plan_structure(engine_model.read_structure(str(TEXT_ENCODER)), attention)
    ref = next(r for r in planned.weights.values() if r.value is None)
    ref.location, ref.offset = str(other), 0
    if target == "outside":
        header["files"][str(other)] = plan_cache.file_identity(str(other))
    tree, arrays = plan_format.encode(planned, attention)
    _write(entry, plan_cache.MAGIC, _data_body(header, tree, arrays))
    _assert_refused_and_planned_again(entry, want, caplog, monkeypatch, "not a file of the model")


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, caplog, monkeypatch):
    entry, _header, _want = _kept(tmp_path)
    monkeypatch.setattr(plan_cache, "MAX_FILE_BYTES", entry.stat().st_size - 1)
    monkeypatch.setattr(plan_cache, "_decode", lambda *a: pytest.fail("an oversized file was read"))
    with caplog.at_level(logging.WARNING, logger="frame.engine.plan_cache"):
        with load_model(str(TEXT_ENCODER), plans=entry.parent):
            pass
    assert any(entry.name in r.getMessage() and "more than a plan's" in r.getMessage() for r in caplog.records)
    assert any("more than a kept plan may be" in r.getMessage() for r in caplog.records)  # nor written again
    assert not entry.exists()
