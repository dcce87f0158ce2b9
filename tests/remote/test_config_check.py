"""``render.*`` in the configuration and ``frame config check`` reaching the render server."""

from __future__ import annotations

import pytest

from frame.cli.program import main
from frame.errors import ConfigError
from frame.worker.checks import check_config
from tests.ports import free_port
from tests.remote.fake_a1111 import FakeA1111


def _write(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_remote_backend_needs_a_url(tmp_path):
    with pytest.raises(ConfigError) as info:
        check_config(_write(tmp_path, "render:\n  backend: remote\n"), environ={})
    assert info.value.problems[0].startswith("render.remote.url: is empty, but render.backend is remote")


def test_bad_remote_values_are_named(tmp_path):
    with pytest.raises(ConfigError) as info:
        check_config(_write(tmp_path, "render:\n  backend: gpu\n  remote:\n    url: ftp://x\n"
                                      "    sampler: heun\n    size: 500x500\n"), environ={})
    keys = [p.split(":")[0] for p in info.value.problems]
    assert keys == ["render.backend", "render.remote.url", "render.remote.sampler", "render.remote.size"]


def test_config_check_reports_a_reachable_server(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FRAME_CONFIG", raising=False)
    with FakeA1111(user="anna", password="pw-secret-1") as fake:
        url = fake.url.replace("http://", "http://anna:pw-secret-1@")
        path = _write(tmp_path, f"render:\n  backend: remote\n  remote:\n    url: \"{url}\"\n")
        assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "render.remote.url: http://***@127.0.0.1:" in out
    assert "answers, 1 model: dreamshaper_8.safetensors [879db523c3]" in out
    assert "pw-secret-1" not in out and fake.requests[0][1] == "/sdapi/v1/sd-models"


def test_config_check_warns_when_the_server_is_unreachable(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FRAME_CONFIG", raising=False)
    path = _write(tmp_path, f"render:\n  backend: remote\n  remote:\n    url: http://127.0.0.1:{free_port()}\n"
                            "    password: pw-secret-2\n")
    assert main(["config", "check", str(path)]) == 0  # a warning: nights fall back to the device
    out = capsys.readouterr().out
    assert "render.remote.url: warning: render server http://127.0.0.1:" in out
    assert "not reachable (Connection refused) (nights fall back to painting on the frame)" in out
    assert "pw-secret-2" not in out


def test_comfyui_backend_needs_a_url_and_a_readable_api_workflow(tmp_path):
    (tmp_path / "ui.json").write_text('{"nodes": [], "links": [], "version": 0.4}')
    with pytest.raises(ConfigError) as info:
        check_config(_write(tmp_path, f"render:\n  backend: comfyui\n  remote:\n    workflow: {tmp_path}/ui.json\n"),
                     environ={})
    url, workflow = info.value.problems
    assert url.startswith("render.remote.url: is empty, but render.backend is comfyui") and ":8188" in url
    assert workflow.startswith("render.remote.workflow: ") and "export it with \"Export (API)\"" in workflow


def test_config_check_lists_comfyuis_checkpoints_and_warns_of_a_missing_one(tmp_path, capsys, monkeypatch):
    from tests.remote.fake_comfyui import FakeComfyUI

    monkeypatch.delenv("FRAME_CONFIG", raising=False)
    with FakeComfyUI(token="tok-secret-3") as fake:
        path = _write(tmp_path, f"render:\n  backend: comfyui\n  remote:\n    url: {fake.url}\n"
                                "    token: tok-secret-3\n    checkpoint: nope.safetensors\n")
        assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"render.remote.url: {fake.url} answers (ComfyUI), 2 checkpoints: dreamshaper_8.safetensors, " in out
    assert "render.remote.checkpoint: warning: 'nope.safetensors' is not among the server's checkpoints" in out
    assert "tok-secret-3" not in out and fake.requests[0][1] == "/object_info/CheckpointLoaderSimple"


@pytest.mark.parametrize("text, words", [
    ('{"3": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested more than 32 levels deep"),  # RecursionError before
    ("[" + "{}," * 300_000 + "{}]", "holds more than 100,000 values"),
])
def test_a_hostile_workflow_is_one_line_of_config_check(tmp_path, text, words):
    (tmp_path / "deep.json").write_text(text)
    with pytest.raises(ConfigError) as info:
        check_config(_write(tmp_path, "render:\n  backend: comfyui\n  remote:\n    url: http://127.0.0.1:1\n"
                                      f"    workflow: {tmp_path}/deep.json\n"), environ={})
    (problem,) = info.value.problems
    assert problem.startswith("render.remote.workflow: ") and f"{tmp_path}/deep.json" in problem and words in problem
    assert "\n" not in problem
