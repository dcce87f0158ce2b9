"""The CLI twins: against a real daemon process, and without one."""

import argparse
import json
import shutil
import subprocess

import pytest

from frame.cli import daemon as commands
from frame.daemon.unit import render_unit
from frame.errors import FrameError, UsageError
from tests.daemon.daemonproc import ROOT, DaemonProcess, write_config


def _run(config_path, *argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")
    parser.add_argument("--debug", action="store_true")
    commands.register(parser.add_subparsers())
    args = parser.parse_args(["--config", str(config_path), *argv])
    return args.func(args)


@pytest.mark.parametrize(("text", "body"), [("+1", {"rating": 1}), ("like", {"rating": 1}), ("-1", {"rating": -1}),
                                            ("dislike", {"rating": -1}), ("1", {"stars": 1}), ("5", {"stars": 5}),
                                            ("Like", {"rating": 1}), ("disliked", {"rating": -1})])
def test_parse_rating(text, body):
    assert commands.parse_rating(text) == body


class _Stdout:
    def __init__(self, encoding):
        self.encoding = encoding


@pytest.mark.parametrize(("text", "said"), [
    ("1", "★☆☆☆☆ 1 of 5 stars = disliked: fewer pictures like it"),
    ("3", "★★★☆☆ 3 of 5 stars = neutral: neither more nor fewer like it"),
    ("5", "★★★★★ 5 of 5 stars = liked: more pictures like it"),
    ("+1", "liked (+1): more pictures like it"), ("like", "liked (+1): more pictures like it"),
    ("-1", "disliked (-1): fewer pictures like it"),
])
def test_a_rating_is_said_with_its_stars_and_meaning(text, said):
    """``frame rate 1 1`` once printed "rated 1", easily read as +1 (a like) for a one-star rating."""
    assert commands.describe_rating(commands.parse_rating(text), _Stdout("utf-8")) == said
    assert commands.describe_rating({"stars": 2}, _Stdout("ascii")).startswith("**... 2 of 5 stars = disliked")


def test_frame_rate_prints_what_the_rating_means(monkeypatch, capsys, tmp_path):
    sent = []

    class FakeClient:
        def request(self, method, path, body):
            sent.append((method, path, body))
            return {"id": 7, "favourite": body.get("stars", 0) >= 4}

    monkeypatch.setattr(commands, "_client", lambda config: FakeClient())
    config, _ = write_config(tmp_path)
    assert _run(config, "rate", "7", "1") == 0
    assert _run(config, "rate", "7", "like") == 0
    assert _run(config, "rate", "7", "4") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "picture 7: ★☆☆☆☆ 1 of 5 stars = disliked: fewer pictures like it"
    assert out[1] == "picture 7: liked (+1): more pictures like it"
    assert out[2].endswith("= liked: more pictures like it; a favourite, shown when a night has no new picture")
    assert [body for *_, body in sent] == [{"stars": 1}, {"rating": 1}, {"stars": 4}]


@pytest.mark.parametrize("text", ["0", "6", "+2", "love", ""])
def test_parse_rating_rejects(text):
    with pytest.raises(UsageError):
        commands.parse_rating(text)


def test_clients_against_running_daemon(tmp_path, capsys):
    config, url = write_config(tmp_path)
    daemon = DaemonProcess(config, url)
    try:
        assert _run(config, "queue", "a koi pond", "--theme", "water") == 0
        assert "queued prompt 1" in capsys.readouterr().out
        assert _run(config, "status") == 0
        out = capsys.readouterr().out
        assert "state: idle" in out and "queued prompts: 1" in out
        with pytest.raises(UsageError, match="no picture with id 5"):  # bad input: exit 2
            _run(config, "rate", "5", "+1")
        assert _run(config, "status", "--json") == 0
        assert json.loads(capsys.readouterr().out)["queued_prompts"] == 1
    finally:
        daemon.terminate()
        daemon.kill()


@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_prompt_is_bad_input_with_or_without_a_daemon(tmp_path, capsys, prompt):
    """``frame queue ""`` exited 1 like a runtime failure; bad input exits 2."""
    from frame.cli.program import main

    config, _ = write_config(tmp_path)
    assert main(["queue", prompt, "--config", str(config)]) == 2
    assert "the prompt is empty" in capsys.readouterr().err


def test_a_request_the_daemon_refuses_as_bad_is_a_usage_error(monkeypatch):
    from frame.cli import client

    class Response:
        def __init__(self, status):
            self.status_code, self.text = status, ""

        def json(self):
            return {"error": f"status {self.status_code}"}

    for status, error in ((400, UsageError), (404, UsageError), (413, UsageError), (409, FrameError),
                          (429, FrameError), (507, FrameError)):
        monkeypatch.setattr("requests.request", lambda *a, status=status, **k: Response(status))
        with pytest.raises(error) as info:
            client.Client(argparse.Namespace(web=argparse.Namespace(listen="127.0.0.1:1"))).request("GET", "/x")
        assert (info.value.exit_code == 2) == (error is UsageError)


def test_clients_without_daemon(tmp_path, capsys):
    config, _ = write_config(tmp_path)
    with pytest.raises(FrameError, match="not running"):
        _run(config, "queue", "a prompt")
    assert _run(config, "status") == 0
    assert "daemon not running" in capsys.readouterr().out


def test_status_without_daemon_never_creates_the_store(tmp_path, capsys):
    """Issue 29 item 22: ``frame status --json`` with no daemon created state_dir/frame.db owned by the
    caller (root, in the installer). A read-only command reads an existing store and creates nothing."""
    config, _ = write_config(tmp_path)
    state = tmp_path / "state"
    shutil.rmtree(state, ignore_errors=True)
    assert _run(config, "status", "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["state"] == "daemon not running" and "no picture store yet" in answer["notice"]
    assert not state.exists()
    from frame.daemon.store.database import Store

    store = Store.open(state)  # what the daemon makes, then closes (no -wal/-shm left)
    picture = store.add_picture(file="x.png", prompt="a lighthouse", seed=1, bytes=3)
    store.record_shown(picture, "night")
    store.close()
    before = sorted(p.name for p in state.iterdir())
    assert _run(config, "status") == 0
    assert f"showing: picture {picture}" in capsys.readouterr().out
    assert sorted(p.name for p in state.iterdir()) == before  # no side files created by the reader


def test_token_command_generates_once(tmp_path, capsys):
    config, _ = write_config(tmp_path, web={"token": ""})
    _run(config, "token")
    first = capsys.readouterr().out.strip()
    _run(config, "token")
    assert capsys.readouterr().out.strip() == first and len(first) >= 12


def test_committed_unit_matches_template():
    assert (ROOT / "systemd" / "frame.service").read_text() == render_unit()


def test_install_service_writes_a_unit_for_this_python(tmp_path, capsys):
    config, _ = write_config(tmp_path)
    target = tmp_path / "frame.service"
    assert _run(config, "install-service", "--output", str(target), "--user", "pi") == 0
    text = target.read_text()
    assert "User=pi" in text and "-m frame run --config" in text and "Type=notify" in text
    assert "sudo systemctl daemon-reload" in capsys.readouterr().out
    with pytest.raises(FrameError, match="cannot write"):
        _run(config, "install-service", "--output", str(tmp_path / "missing" / "x.service"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("which", ["committed", "installed"])
def test_systemd_analyze_verify(tmp_path, which):
    if which == "committed":
        text = render_unit(exec_start=shutil.which("true"))
    else:
        config, _ = write_config(tmp_path)
        text = subprocess.run([*_python_frame(), "--config", str(config), "install-service", "--print"],
                              capture_output=True, text=True, check=True, cwd=ROOT).stdout
    unit = tmp_path / "frame.service"
    unit.write_text(text)
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "frame.service" not in result.stderr, result.stderr


def _python_frame():
    import sys

    return [sys.executable, "-m", "frame"]


def test_unit_relaxes_protect_home_for_a_venv_in_home(monkeypatch):
    from frame.daemon import unit

    monkeypatch.setattr(unit.sys, "executable", "/home/pi/venv/bin/python")
    monkeypatch.setattr(unit.sys, "prefix", "/home/pi/venv")
    text = unit.unit_for_this_install("pi", None)
    assert "ProtectHome=read-only" in text and "ExecStart=/home/pi/venv/bin/python -m frame run\n" in text
    monkeypatch.setattr(unit.sys, "executable", "/opt/frame/bin/python")
    monkeypatch.setattr(unit.sys, "prefix", "/opt/frame")
    assert "ProtectHome=yes" in unit.unit_for_this_install("frame", None)
