"""``frame config check``'s deeper checks: names known to the display, suggested when misspelt, reported
together with the schema's problems and with their lines."""

import pytest

from frame.errors import ConfigError
from frame.worker.checks import check_config


def _problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        check_config(path, environ={})
    return info.value.problems


def test_misspelt_panel_and_palette_get_a_suggestion_and_a_line(tmp_path):
    assert _problems(tmp_path, "display:\n  panel: waveshare-7in3g\n  palette: spectra7\n") == [
        "display.panel: unknown panel 'waveshare-7in3g'; did you mean 'waveshare-7in3f'? (line 2)",
        "display.palette: unknown palette 'spectra7'; did you mean 'spectra6'? (line 3)",
    ]


def test_unrecognisable_names_list_the_known_ones(tmp_path):
    from frame.display import palette_names

    problems = _problems(tmp_path, "display:\n  palette: zzzzzz\n")
    assert problems == [f"display.palette: unknown palette 'zzzzzz' (known: {', '.join(palette_names())}) (line 2)"]


def test_schema_and_deep_problems_are_reported_in_one_run(tmp_path):
    problems = _problems(tmp_path, f"model:\n  source: {tmp_path / 'nothing'}\n"
                                   "display:\n  panel: inkyy\nweb:\n  listen: nowhere\n")
    # the schema checks the panel name against the panel table since issue 30: reported with its problems
    assert [p.split(":", 1)[0] for p in problems] == ["display.panel", "web.listen", "model.source"]
    assert f"{tmp_path / 'nothing'} does not exist" in problems[2]  # not "neither ... nor" (issue 29)
    assert problems[2].endswith("(line 2)")
    (tmp_path / "empty").mkdir()
    empty = _problems(tmp_path, f"model:\n  source: {tmp_path / 'empty'}\n")
    assert "(no model_index.json there) nor an OnnxStream model folder" in empty[0]
    assert "did you mean 'inky'?" in problems[0] and problems[0].endswith("(line 4)")


def test_environment_overrides_are_checked_too(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("{}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        check_config(path, environ={"FRAME_DISPLAY__PANEL": "virtul"})
    assert info.value.problems == ["display.panel: unknown panel 'virtul'; did you mean 'virtual'? "
                                   "(from environment variable FRAME_DISPLAY__PANEL)"]


def test_valid_file_passes(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("display:\n  panel: waveshare-7in3e\n", encoding="utf-8")
    assert check_config(path, environ={}).display.panel == "waveshare-7in3e"
