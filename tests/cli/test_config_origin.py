"""``frame config show --origin``: one key a line with the layer its value comes from."""

from __future__ import annotations

from frame.cli.config import origin_lines


def test_origin_lines_name_every_layer(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {state}\nmodel:\n  steps: 12\n  token: hf_do_not_print\n")
    (state / "settings.yaml").write_text("display:\n  dither: atkinson\n")
    lines = origin_lines(str(path), {"FRAME_MODEL__SAMPLER": "ddim"})
    assert f'model.steps: 12  # {path} line 3' in lines
    assert f'display.dither: "atkinson"  # {state / "settings.yaml"} line 2 (set on the settings page)' in lines
    assert 'model.sampler: "ddim"  # from environment variable FRAME_MODEL__SAMPLER' in lines
    assert 'display.fit: "cover"  # built-in default' in lines
    assert not any("hf_do_not_print" in line for line in lines)


def test_an_unused_settings_file_is_named_and_its_values_are_not_claimed(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {state}\n")
    (state / "settings.yaml").write_text("display:\n  dither: nonsense\n")
    lines = origin_lines(str(path), {})
    assert lines[0].startswith("# not used:") and "display.dither" in lines[0]
    assert 'display.dither: "auto"  # built-in default' in lines
