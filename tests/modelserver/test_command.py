"""``frame serve-model`` as a command: prints where it serves, answers ranges, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from frame.cli.program import main
from tests.modelserver.conftest import TOKEN

ROOT = Path(__file__).resolve().parents[2]


def test_serves_until_sigterm(folder, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "frame", "serve-model", str(folder), "--listen", "127.0.0.1:0",
                             "--token-file", str(token_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        first = proc.stdout.readline()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", first).group(1))
        second = proc.stdout.readline()
        assert "model.source: http://127.0.0.1:" in second and TOKEN not in first + second
        r = requests.get(f"http://127.0.0.1:{port}/weights.bin", headers={"Range": "bytes=4-7",
                         "Authorization": f"Bearer {TOKEN}"}, timeout=5)
        assert r.status_code == 206 and r.content == bytes([4, 5, 6, 7])
        assert requests.get(f"http://127.0.0.1:{port}/weights.bin", timeout=5).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and TOKEN not in err


@pytest.mark.parametrize("argv, message", [
    (["serve-model", "/nonexistent/models"], "is not a folder"),
    (["serve-model", ".", "--listen", "nowhere"], "must be HOST:PORT"),
    (["serve-model", ".", "--token-file", "/nonexistent/token"], "cannot read --token-file"),
    (["serve-model", ".", "--token", "has space"], "the token must be printable ASCII"),
])
def test_bad_arguments_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err
