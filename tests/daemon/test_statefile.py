import errno
import json
import logging
import os

import pytest

from frame.daemon import statefile


def test_json_round_trip(tmp_path):
    path = tmp_path / "job.json"
    statefile.write_json(path, {"seed": 7, "prompt": "ü"})
    assert statefile.read_json(path) == {"seed": 7, "prompt": "ü"}
    assert statefile.read_json(tmp_path / "missing.json", default={}) == {}


@pytest.mark.parametrize("damage", ["truncate", "edit", "garbage", "plain-json"])
def test_damaged_file_is_detected_and_set_aside(tmp_path, caplog, damage):
    path = tmp_path / "job.json"
    statefile.write_json(path, {"seed": 7, "steps": 20})
    raw = path.read_bytes()
    damaged = {"truncate": raw[: len(raw) // 2], "edit": raw.replace(b"20", b"21"),
               "garbage": os.urandom(64), "plain-json": json.dumps({"seed": 7}).encode()}[damage]
    path.write_bytes(damaged)
    with caplog.at_level(logging.ERROR):
        assert statefile.read_json(path, default="fallback") == "fallback"
    assert "damaged" in caplog.text
    assert not path.exists()
    assert len(list(tmp_path.glob("job.json.corrupt-*"))) == 1


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "picture.png"
    statefile.write_bytes_atomic(path, b"old")
    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data[:3]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(statefile.os, "write", full_disk)
    with pytest.raises(OSError) as info:
        statefile.write_bytes_atomic(path, b"new picture bytes")
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["picture.png"]
