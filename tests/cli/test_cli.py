"""The frame command's exit codes and error lines (0 ok, 1 runtime failure, 2 usage/config)."""

import subprocess
import sys
from pathlib import Path

import pytest

from frame.cli.program import build_parser, main
from frame.config import load_config

THREE_MISTAKES = "model:\n  sampler: eulr\ndisplay:\n  fitt: cover\nschedule:\n  show_at: 7pm\n"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "frame", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_config_check_reports_three_mistakes_and_exits_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(THREE_MISTAKES)
    result = run("config", "check", str(path))
    assert result.returncode == 2
    assert "model.sampler:" in result.stderr and "did you mean 'euler'" in result.stderr
    assert "display.fitt: unknown key; did you mean 'fit'? (line 4)" in result.stderr
    assert "schedule.show_at: must be a 24-hour time HH:MM, got '7pm' (line 6)" in result.stderr
    assert "3 problems" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_check_valid_file_exits_0(capsys):
    repo_config = Path(__file__).resolve().parents[2] / "config.yaml"
    assert main(["config", "check", str(repo_config)]) == 0
    assert "ok" in capsys.readouterr().out


def test_config_check_reports_missing_model_folder(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(f"model:\n  source: {tmp_path / 'no-model'}\n")
    assert main(["config", "check", str(path)]) == 2
    assert "model.source:" in capsys.readouterr().err


def test_unknown_command_is_usage_error(capsys):
    assert main(["paint-everything"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("frame: error:") and "invalid choice" in err


def test_bad_option_value_is_usage_error(capsys):
    assert main(["demo", "--steps", "many"]) == 2
    assert "invalid int value" in capsys.readouterr().err


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_runtime_failure_exits_1_without_traceback(monkeypatch, capsys):
    import frame.cli.config

    def explode(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(frame.cli.config, "_config_show", explode)
    assert main(["config", "show"]) == 1
    err = capsys.readouterr().err
    assert "disk on fire" in err and "Traceback" not in err


def test_debug_shows_traceback(monkeypatch, capsys):
    import frame.cli.config

    def explode(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(frame.cli.config, "_config_show", explode)
    assert main(["--debug", "config", "show"]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["before", "after"])
def test_config_and_debug_work_on_either_side_of_the_subcommand(tmp_path, monkeypatch, capsys, where):
    """``frame status --config FILE`` was 'unrecognized arguments'; only ``frame --config FILE status`` worked."""
    import frame.cli.config

    monkeypatch.delenv("FRAME_CONFIG", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  size: 504x296\n")
    options = ["--config", str(path)]
    assert main([*options, "status"] if where == "before" else ["status", *options]) == 0
    out = capsys.readouterr().out  # the configured state_dir is the one read (and, read-only, not created)
    assert "daemon not running" in out and f"no picture store yet in {tmp_path / 'state'}" in out
    assert not (tmp_path / "state").exists()
    assert main([*options, "config", "check"] if where == "before" else ["config", "check", *options]) == 2
    assert "model.size:" in capsys.readouterr().err

    def explode(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(frame.cli.config, "_config_show", explode)
    assert main(["--debug", "config", "show"] if where == "before" else ["config", "show", "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_a_global_option_after_the_subcommand_wins_over_one_before(tmp_path):
    args = build_parser().parse_args(["--config", "a.yaml", "status", "--config", "b.yaml"])
    assert args.config == "b.yaml" and args.debug is False
    args = build_parser().parse_args(["--config", "a.yaml", "engine", "info", "m.onnx"])
    assert args.config == "a.yaml"
    args = build_parser().parse_args(["engine", "info", "m.onnx", "--debug", "--config", "c.yaml"])
    assert args.config == "c.yaml" and args.debug is True


def test_config_show_hides_token(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("web:\n  token: very-secret-owner-token\n")
    assert main(["config", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "very-secret" not in out and "token: '***'" in out


def test_config_show_prints_yaml_that_every_reader_reads_back_the_same(tmp_path, capsys):
    """``yaml.safe_dump`` left ``02:00`` (base 60 in YAML 1.1: 120), ``y`` (a YAML 1.1 boolean) and
    ``1e3`` (a YAML 1.2 float) bare; ``config show`` quotes them as ``settings.yaml`` does."""
    path = tmp_path / "c.yaml"
    path.write_text("schedule:\n  render_at: '02:00'\ntaste:\n  themes: ['y', '1e3', a harbour]\n")
    assert main(["config", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  render_at: '02:00'\n" in out and "  - 'y'\n" in out and "  - '1e3'\n" in out
    assert "  - a harbour\n" in out  # ordinary text stays plain
    again = tmp_path / "again.yaml"
    again.write_text(out.replace("'***'", "''"))  # the hidden token is not a valid one
    assert load_config(again, environ={}) == load_config(path, environ={})


@pytest.mark.parametrize("command", [[], ["demo"], ["config"], ["config", "check"]])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    assert "usage: frame" in capsys.readouterr().out


def test_every_registered_subcommand_has_help_text():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    helps = {choice.dest: choice.help for choice in subparsers._choices_actions}
    assert helps and all(helps.values()), helps


# --- engine errors as one clear line (issue 13 item 23) -------------------------------------------

def _one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("frame: error: "), result.stderr
    assert "Traceback" not in result.stderr and "Error:" not in lines[0].split("frame: error: ", 1)[1]
    return lines[0]


def test_engine_info_on_a_folder_says_it_is_a_folder_and_names_its_models(tmp_path):
    from frame.models import demo_model_path

    empty = tmp_path / "nothing"
    empty.mkdir()
    result = run("engine", "info", str(empty))
    assert result.returncode == 1
    assert "is a folder, neither an ONNX model file nor an OnnxStream model folder" in _one_error_line(result)
    line = _one_error_line(run("engine", "info", str(demo_model_path())))
    assert f"e.g. {demo_model_path() / 'text_encoder' / 'model.onnx'}" in line  # IsADirectoryError before


@pytest.mark.parametrize("content", [b"hello, this is a text file\n", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4])
def test_engine_info_on_a_file_that_is_not_onnx_says_so(tmp_path, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    result = run("engine", "info", str(path))
    assert result.returncode == 1
    assert f"{path} is not a valid ONNX model file (" in _one_error_line(result)  # was "unsupported wire type"


def test_output_into_a_closed_pipe_is_quiet():
    """``frame engine info model.onnx | head -1`` once ended in a BrokenPipeError traceback."""
    import os

    from frame.models import demo_model_path

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before frame writes a byte
    try:
        result = subprocess.run([sys.executable, "-m", "frame", "engine", "info",
                                 str(demo_model_path() / "unet" / "model.onnx")],
                                stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert result.stderr == "" and result.returncode == 141
