"""``frame estimate`` and ``frame config check`` read a URL model as the render does (issue 28 item 4):
with ``model.token`` (bearer) or ``user:password@`` in ``model.source`` (basic auth), against a real
``frame serve-model`` with a token on 127.0.0.1. Both once got HTTP 401: the estimate opened the model
without the configured HTTP settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from frame.cli.program import main
from tests.modelserver.conftest import TOKEN, Served

DEMO = Path(__file__).resolve().parents[2] / "frame" / "models" / "demo"


@pytest.fixture(scope="module")
def demo_server():
    served = Served(DEMO, TOKEN)
    yield served
    served.close()


def _config(tmp_path: Path, source: str, token: str = "") -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  source: '{source}'\n  token: '{token}'\n"
                    "  size: 64x64\n  steps: 2\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("how", ["model.token", "user:password in the URL"])
def test_estimate_and_config_check_use_the_models_credentials(tmp_path, capsys, demo_server, how):
    if how == "model.token":
        config = _config(tmp_path, demo_server.url(), TOKEN)
    else:
        config = _config(tmp_path, demo_server.url(userinfo=f"frame:{TOKEN}"))
    assert main(["--config", config, "estimate", "--measure-seconds", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "per step:" in out and "Wi-Fi" in out
    assert "storage not measured" not in out  # the read probe's range request carried the credentials too
    assert main(["config", "check", config]) == 0
    out = capsys.readouterr().out
    assert "estimate: per step:" in out and "no estimate" not in out and "HTTP 401" not in out, out


def test_without_credentials_the_estimate_names_the_refusal(tmp_path, capsys, demo_server):
    config = _config(tmp_path, demo_server.url())
    assert main(["--config", config, "estimate", "--measure-seconds", "0.2"]) != 0
    assert "HTTP 401" in capsys.readouterr().err
