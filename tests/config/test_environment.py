"""``FRAME_*`` variables that are not settings stay out of the configuration (issue 28 item 1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from frame.config import environment
from frame.config.loader import resolve

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bFRAME_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def _names_in_source() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "frame").rglob("*.py"):
        names.update(NAME.findall(path.read_text(encoding="utf-8")))
    return names


def test_every_frame_variable_in_the_source_is_a_setting_or_listed_as_not_one():
    """A variable the code reads or sets for itself (the daemon's FRAME_PARENT_PID for its workers) must
    be in ``environment.NOT_SETTINGS``; every other name the source mentions must be a real setting."""
    names = _names_in_source()
    assert environment.PARENT_PID in names and "FRAME_STATE_DIR" in names  # the scan sees both kinds
    for name in sorted(names - environment.NOT_SETTINGS):
        resolved = resolve(None, {name: "1"}, with_owner=False)
        unknown = [line for line in resolved.problems.lines if "unknown key" in line]
        assert not unknown, f"{name} is neither a setting nor in environment.NOT_SETTINGS: {unknown}"


@pytest.mark.parametrize("name", sorted(environment.NOT_SETTINGS - {environment.CONFIG_FILE}))
def test_internal_variables_are_not_read_as_settings(name):
    resolved = resolve(None, {name: "123"}, with_owner=False)
    assert resolved.problems.lines == []


def test_a_misspelt_setting_is_still_an_error():
    resolved = resolve(None, {"FRAME_MODEL__STESP": "8"}, with_owner=False)
    assert any("unknown key" in line and "FRAME_MODEL__STESP" in line for line in resolved.problems.lines)


def test_config_check_accepts_the_daemons_parent_pid(tmp_path):
    """``FRAME_PARENT_PID=123 frame config check`` exited 2 with "parent_pid: unknown key"."""
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAME_PARENT_PID": "123", "FRAME_WORKER_LOG": "DEBUG"}
    done = subprocess.run([sys.executable, "-m", "frame", "--config", str(config), "config", "show"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "parent_pid" not in done.stdout
