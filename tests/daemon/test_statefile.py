import json
import logging
import os

import pytest

from frame import statefile


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
