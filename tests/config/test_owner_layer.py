"""The owner layer (``<state_dir>/settings.yaml``): its place between the file and the environment,
where each value comes from, atomic saves with the previous version kept, and a broken file that
never stops the frame nor gets lost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from frame.config import load_config, owner
from frame.config.loader import resolve
from frame.errors import ConfigError


def _setup(tmp_path: Path, file_text: str, settings_text: str | None) -> tuple[Path, dict]:
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {state}\n" + file_text, encoding="utf-8")
    if settings_text is not None:
        (state / "settings.yaml").write_text(settings_text, encoding="utf-8")
    return path, {}


def test_owner_layer_sits_above_the_file_and_below_the_environment(tmp_path):
    path, environ = _setup(tmp_path, "model:\n  steps: 12\n  sampler: ddim\nschedule:\n  render_at: '01:30'\n",
                           "model:\n  steps: 20\n  sampler: lcm\n")
    config = load_config(path, environ={"FRAME_MODEL__SAMPLER": "euler"})
    assert config.model.steps == 20  # settings.yaml over the file
    assert config.model.sampler == "euler"  # the environment over settings.yaml
    assert config.schedule.render_at == "01:30"  # untouched keys still come from the file


def test_origin_names_each_layer(tmp_path):
    path, _ = _setup(tmp_path, "model:\n  steps: 12\n", "schedule:\n  quiet_hours: 22:00-07:00\n")
    layers = resolve(path, {"FRAME_MODEL__GUIDANCE": "3"}).layers
    assert layers.origin(("model", "steps")) == f"{path} line 3"
    assert layers.origin(("schedule", "quiet_hours")).startswith(str(tmp_path / "state" / "settings.yaml") + " line 2")
    assert layers.origin(("model", "guidance")) == "from environment variable FRAME_MODEL__GUIDANCE"
    assert layers.origin(("display", "fit")) == "built-in default"


def test_state_dir_is_never_taken_from_settings_yaml(tmp_path):
    path, _ = _setup(tmp_path, "", "state_dir: /elsewhere\nmodel:\n  steps: 9\n")
    resolved = resolve(path, {})
    assert resolved.config.state_dir == str(tmp_path / "state")
    assert any("state_dir: cannot be set in settings.yaml" in p for p in resolved.owner_problems)
    assert resolved.config.model.steps is None  # a layer with a problem is not used at all


@pytest.mark.parametrize("text", ["schedule: [\n", "- a list\n", "schedule:\n  render_at: '25:00'\n"])
def test_unusable_settings_fall_back_to_the_layers_below(tmp_path, text, caplog):
    path, _ = _setup(tmp_path, "model:\n  steps: 12\n", text)
    config = load_config(path, environ={})  # no ConfigError: the frame still starts
    assert config.model.steps == 12 and config.schedule.render_at == "01:00"
    assert "settings made on the phone are not used" in caplog.text
    with pytest.raises(ConfigError):  # but frame config check says so
        from frame.worker.checks import check_config
        check_config(path, environ={})


def test_a_broken_file_layer_is_still_an_error(tmp_path):
    path, _ = _setup(tmp_path, "model:\n  steps: -1\n", "model:\n  steps: 5\n")
    with pytest.raises(ConfigError, match="model.steps"):
        load_config(path, environ={})


def test_save_keeps_the_previous_version_and_restore_swaps(tmp_path):
    state = tmp_path
    owner.save(state, {"model": {"steps": 4}})
    owner.save(state, {"model": {"steps": 8}})
    assert "steps: 8" in (state / "settings.yaml").read_text()
    assert "steps: 4" in (state / "settings.previous.yaml").read_text()
    assert os.stat(state / "settings.yaml").st_mode & 0o777 == 0o600
    assert owner.restore_previous(state)
    assert "steps: 4" in (state / "settings.yaml").read_text()
    assert owner.restore_previous(state)  # a second restore undoes the first
    assert "steps: 8" in (state / "settings.yaml").read_text()


def test_a_failed_save_leaves_the_old_file_whole(tmp_path, monkeypatch):
    owner.save(tmp_path, {"model": {"steps": 4}})
    before = (tmp_path / "settings.yaml").read_bytes()
    real = os.replace

    def fail_on_settings(src, dst):
        if str(dst).endswith("settings.yaml"):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_settings)
    with pytest.raises(OSError):
        owner.save(tmp_path, {"model": {"steps": 99}})
    assert (tmp_path / "settings.yaml").read_bytes() == before
    assert not list(tmp_path.glob(".settings.yaml.tmp-*"))


def test_set_aside_keeps_the_file(tmp_path):
    (tmp_path / "settings.yaml").write_text("schedule: [\n")
    aside = owner.set_aside(tmp_path)
    assert aside is not None and aside.read_text() == "schedule: [\n"
    assert not (tmp_path / "settings.yaml").exists()


MISREAD = ["02:00", "07:00", "12:30", "22:00-07:00", "yes", "no", "on", "off", "y", "N", "True", "null", "~",
           "1e3", "0o17", "0x1F", "1.0", "0123", ".5", "+1", "-1", "1_000", ".inf"]


def test_strings_other_yaml_readers_would_misread_are_written_quoted(tmp_path):
    """settings.yaml once said ``render_at: 02:00`` bare: a hand edit to 12:30 is the base-60 number 750
    for a YAML 1.1 reader, and ``y``/``1e3``/``0o17`` came out bare too (a boolean, a float, 15)."""
    from frame.daemon.settings import SettingsEditor

    path, environ = _setup(tmp_path, "", None)
    editor = SettingsEditor(path, environ)
    proposal = editor.propose({"schedule.render_at": "02:00", "schedule.quiet_hours": "22:00-07:00",
                               "taste.themes": MISREAD + ["a quiet harbour"], "model.size": "512x320"})
    assert proposal.ok, proposal.problems
    editor.save(proposal)
    text = owner.settings_path(tmp_path / "state").read_text(encoding="utf-8")
    for value in MISREAD + ["512x320"]:
        assert f"'{value}'" in text, f"{value!r} is written bare:\n{text}"
    assert "- a quiet harbour\n" in text  # plain words stay plain, as the owner would write them
    plain = yaml.safe_load(text)  # a plain reader, not the project's own loader
    assert plain["schedule"] == {"render_at": "02:00", "quiet_hours": "22:00-07:00"}
    assert plain["taste"]["themes"] == MISREAD + ["a quiet harbour"]
    assert plain["model"]["size"] == "512x320"
    assert owner.read_owner_layer(tmp_path / "state").data == plain
    assert load_config(path, environ={}).schedule.render_at == "02:00"
