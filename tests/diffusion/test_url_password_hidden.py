"""A model URL's password never leaves the process: not in the log, not on stdout or stderr, not in the
picture's metadata. The password reaches the model server (the render works) and nothing else.

Runs the real commands (``frame render --debug``, ``frame config check``) as subprocesses against a real
``frame serve-model`` server on 127.0.0.1 that serves the demo model (its model_index.json has no
``_name_or_path``, so the model is named after its source: the URL)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from frame.diffusion import load_pipeline
from frame.models import demo_model_path
from tests.modelserver.conftest import TOKEN, Served

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def nas():
    served = Served(demo_model_path(), TOKEN)
    yield served
    served.close()


def _frame(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "frame", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_render_from_a_url_with_a_password_never_shows_it(nas, tmp_path):
    source = nas.url(userinfo=f"frame:{TOKEN}")
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  source: '{source}'\n"
                      f"  cache_dir: {tmp_path / 'cache'}\n")
    out = tmp_path / "x.png"
    render = _frame("--config", str(config), "--debug", "render", "--prompt", "a cat", "--steps", "1",
                    "--size", "32x32", "--seed", "3", "--out", str(out), cwd=tmp_path)
    assert render.returncode == 0, render.stderr
    check = _frame("--config", str(config), "config", "check", cwd=tmp_path)
    shown = render.stdout + render.stderr + check.stdout + check.stderr
    assert "SD 1.5" in shown  # the model_info line is there, named without the secret
    assert TOKEN not in shown
    assert TOKEN.encode() not in out.read_bytes()  # the PNG's parameters name the model


def test_the_model_name_in_memory_has_no_password(nas, tmp_path):
    pipe = load_pipeline(nas.url(userinfo=f"frame:{TOKEN}"), cache_dir=tmp_path)
    assert TOKEN not in pipe.info.name and "***@127.0.0.1" in pipe.info.name
