"""Config layering (defaults < file < environment) and the all-at-once validation messages."""

from pathlib import Path

import pytest

from frame.config import Config, load_config, to_plain
from frame.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path, environ=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ or {})
    return info.value.problems


def test_defaults_only_when_no_file():
    assert load_config(None, environ={}) == Config()


def test_repo_config_yaml_documents_exactly_the_defaults():
    assert load_config(REPO / "config.yaml", environ={}) == Config()


def test_repo_config_yaml_comments_every_key():
    lines = (REPO / "config.yaml").read_text().splitlines()
    for number, line in enumerate(lines):
        stripped = line.strip()
        is_key = stripped and not stripped.startswith(("#", "-")) and ":" in stripped
        if is_key and not line.startswith("    \""):  # button pin entries are documented by their parent
            assert lines[number - 1].strip().startswith("#") or stripped.endswith(":"), line


def test_repo_config_yaml_states_the_step_and_guidance_defaults_the_code_uses():
    """One default per model kind, in ModelInfo; config.yaml quotes it (it once said 8 for the demo
    while frame render ran 20)."""
    from frame.diffusion.model_info import DEFAULT_GUIDANCE, REGULAR_STEPS, SD15, SDXL, TURBO_STEPS
    from frame.models import DEMO_DEFAULT_STEPS

    text = (REPO / "config.yaml").read_text()
    steps = text.split("  steps: null")[0].rsplit("# Denoising steps", 1)[1]
    assert (f"{REGULAR_STEPS} for SD 1.5/SDXL, {TURBO_STEPS} for Turbo, {DEMO_DEFAULT_STEPS} for the demo"
            in " ".join(steps.split()))
    guidance = text.split("  guidance: null")[0].rsplit("# Classifier-free guidance", 1)[1]
    assert f"{DEFAULT_GUIDANCE[SD15]:g} for SD 1.5, {DEFAULT_GUIDANCE[SDXL]:g} for SDXL, 0 for Turbo" in guidance


def test_file_overrides_defaults_and_keeps_other_keys(tmp_path):
    config = load_config(write(tmp_path, "model:\n  steps: 12\nschedule:\n  render_at: '02:30'\n"), environ={})
    assert config.model.steps == 12
    assert config.model.source == "demo"
    assert config.schedule.render_at == "02:30"


def test_unquoted_clock_times_stay_strings(tmp_path):
    config = load_config(write(tmp_path, "schedule:\n  render_at: 01:30\n  show_at: 07:05\n"), environ={})
    assert (config.schedule.render_at, config.schedule.show_at) == ("01:30", "07:05")


def test_environment_overrides_file(tmp_path):
    path = write(tmp_path, "model:\n  steps: 12\n  sampler: ddim\n")
    config = load_config(path, environ={"FRAME_MODEL__STEPS": "3", "FRAME_STATE_DIR": "/var/lib/frame",
                                        "FRAME_TASTE__THEMES": "[boats, trees]"})
    assert config.model.steps == 3
    assert config.model.sampler == "ddim"
    assert config.state_dir == "/var/lib/frame"
    assert config.taste.themes == ("boats", "trees")


def test_system_file_is_the_default_layer_and_env_still_wins(tmp_path, monkeypatch):
    import frame.config.loader as loader

    system = write(tmp_path, "model:\n  steps: 9\n  sampler: ddim\n")
    monkeypatch.setattr(loader, "SYSTEM_CONFIG", system)
    config = load_config(None, environ={"FRAME_MODEL__STEPS": "4"})
    assert (config.model.steps, config.model.sampler) == (4, "ddim")
    other = tmp_path / "other.yaml"
    other.write_text("model:\n  sampler: euler\n")
    assert load_config(other, environ={}).model.steps is None  # --config replaces the system file


def test_frame_config_variable_names_the_file(tmp_path):
    path = write(tmp_path, "model:\n  steps: 5\n")
    assert load_config(None, environ={"FRAME_CONFIG": str(path)}).model.steps == 5


def test_all_problems_reported_with_paths_lines_and_suggestions(tmp_path):
    path = write(tmp_path, "model:\n  sampler: euler_ancestral\n  stepz: 4\n"
                           "display:\n  fit: cover\n  rotate: 45\nschedule:\n  render_at: '25:00'\n")
    problems = problems_of(path)
    assert len(problems) == 4
    assert problems[0].startswith("model.sampler: must be one of") and "(line 2)" in problems[0]
    assert problems[1] == "model.stepz: unknown key; did you mean 'steps'? (line 3)"
    assert problems[2].startswith("display.rotate: must be one of 0, 90, 180, 270") and "(line 6)" in problems[2]
    assert problems[3] == "schedule.render_at: must be a 24-hour time HH:MM, got '25:00' (line 8)"


def test_environment_problems_name_the_variable():
    problems = problems_of(None, {"FRAME_WORKER__NICE": "40", "FRAME_WEB__LISTN": "x"})
    assert "worker.nice: must be a nice level from 0 to 19, got 40 (from environment variable " \
           "FRAME_WORKER__NICE)" in problems
    assert any(p.startswith("web.listn: unknown key; did you mean 'listen'?") for p in problems)


def test_type_errors_and_nested_lists(tmp_path):
    path = write(tmp_path, "feeds:\n  sources:\n    - url: ftp://example\n      format: xml\n"
                           "    - {url: 'http://127.0.0.1/feed', weight: 'heavy'}\n")
    problems = problems_of(path)
    assert problems[0].startswith("feeds.sources[0].url: must be an http(s) URL") and "(line 3)" in problems[0]
    assert problems[1].startswith("feeds.sources[0].format: must be one of json, text, rss")
    assert problems[2].startswith("feeds.sources[1].weight: must be a number, got str")


def test_numbers_must_be_finite(tmp_path):
    """``guidance: .inf`` once passed (inf >= 0) and reached the render, where it makes every pixel NaN."""
    path = write(tmp_path, "model:\n  guidance: .inf\ntaste:\n  explore_rate: .nan\n"
                           "feeds:\n  sources:\n    - {url: 'https://example.org/f', weight: .inf}\n")
    problems = problems_of(path)
    assert problems[0].startswith("model.guidance: must be a finite number, got inf (line 2)")
    assert problems[1].startswith("taste.explore_rate: must be a finite number, got nan")
    assert problems[2].startswith("feeds.sources[0].weight: must be a finite number, got inf")
    assert len(problems) == 3
    assert load_config(write(tmp_path, "model:\n  guidance: 7\n")).model.guidance == 7.0  # an int still converts


def test_secret_values_never_appear(tmp_path):
    path = write(tmp_path, "web:\n  token: [not, a, string]\n")
    (problem,) = problems_of(path)
    assert problem.startswith("web.token: must be a string, got list")
    assert "not" not in problem.split("got list")[1]
    config = load_config(None, environ={"FRAME_WEB__TOKEN": "s3cret-token-value"})
    assert to_plain(config)["web"]["token"] == "***"
    assert "s3cret" not in str(to_plain(config))


def test_yaml_syntax_error_names_the_line(tmp_path):
    (problem,) = problems_of(write(tmp_path, "model:\n  steps: [1,\n  sampler: euler\n"))
    assert problem.startswith("not valid YAML") and "line" in problem


def test_top_level_must_be_a_mapping(tmp_path):
    (problem,) = problems_of(write(tmp_path, "- a\n- b\n"))
    assert "must be a mapping of sections" in problem


def test_missing_file_is_a_config_error(tmp_path):
    (problem,) = problems_of(tmp_path / "nope.yaml")
    assert problem.startswith("no such file")


def test_config_is_frozen():
    config = load_config(None, environ={})
    with pytest.raises(AttributeError):
        config.model.steps = 3  # type: ignore[misc]
