"""What an owner met on the command line (issue 29 item 21): exit codes, messages that name the right
option, a log line with a URL that answers, and a description under every command's --help."""

from __future__ import annotations

import logging
import socket

import pytest
import requests

from frame.cli.program import build_parser, main


@pytest.fixture
def no_model_load(monkeypatch):
    """Fails the test if the model is loaded: bad input must be refused before."""
    def load(*_args, **_kwargs):
        raise AssertionError("the model was loaded before the bad input was reported")

    monkeypatch.setattr("frame.diffusion.configured.load_configured_pipeline", load)


def test_a_missing_model_folder_is_bad_input_exit_2(tmp_path, capsys, no_model_load):
    assert main(["render", "--model", str(tmp_path / "nonexistent"), "--prompt", "x",
                 "--out", str(tmp_path / "x.png")]) == 2
    assert f"--model {tmp_path / 'nonexistent'}: no such model folder" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "said"), [(None, "no such file"), (b"not a picture", "not a picture Pillow")])
def test_a_bad_init_image_is_reported_before_the_model_loads(tmp_path, capsys, no_model_load, content, said):
    init = tmp_path / "init.png"
    if content is not None:
        init.write_bytes(content)
    assert main(["render", "--model", "demo", "--prompt", "x", "--init-image", str(init),
                 "--out", str(tmp_path / "x.png")]) == 2
    assert f"--init-image {init}: {said}" in capsys.readouterr().err


def test_config_check_says_a_missing_model_folder_does_not_exist(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(f"model:\n  source: {tmp_path / 'no-model'}\n")
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"model.source: {tmp_path / 'no-model'} does not exist" in err and "neither" not in err


def test_serve_model_on_a_busy_port_names_its_listen_flag(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve-model", str(tmp_path), "--listen", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port} (--listen)" in err and "web.listen" not in err


def test_serve_render_logs_a_url_that_answers(caplog):
    from frame.cli.serve_render import RenderServer

    with caplog.at_level(logging.INFO, logger="frame.net.server"):
        server = RenderServer(object(), "frame", "demo", "a-token-for-tests", "127.0.0.1:0", max_waiting=1)
    try:
        [line] = [r.getMessage() for r in caplog.records if "listening on" in r.getMessage()]
        url = line.split("listening on ", 1)[1].split()[0]
        answer = requests.get(url, headers={"Authorization": "Bearer a-token-for-tests"}, timeout=10)
        assert answer.status_code == 200, (line, answer.status_code)
        assert "/api/status" not in line
    finally:
        server.close()


@pytest.mark.parametrize("command", ["run", "status", "render", "render-now", "token", "rate", "config"])
def test_every_command_describes_itself_under_help(command):
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    description = subparsers.choices[command].description
    assert description and len(description) > 20, f"frame {command} --help has no description"
