"""``frame config check`` says what each LoRA changes and fails on one that cannot be found."""

from __future__ import annotations

from pathlib import Path

from frame.cli.program import main as frame_main

SD15 = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sd15"


def _config(tmp_path, loras: str, themes: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  source: {SD15 / 'model'}\n  loras:\n{loras}"
                    f"taste:\n  themes: [{themes}]\n")
    return str(path)


def test_config_check_reports_loras(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("frame.cli.config._describe_estimate", lambda config: None)
    good = _config(tmp_path, f"    - file: {SD15 / 'loras' / 'ink.safetensors'}\n      scale: 0.8\n",
                   '"a harbour <lora:wood:0.5>"')
    assert frame_main(["--config", good, "config", "check"]) == 0
    out = capsys.readouterr().out
    assert "model.loras: unet: ink: 64 module(s) applied" in out
    bad = _config(tmp_path, "    - file: nope\n", '"a harbour <lora:missing:0.5>"')
    assert frame_main(["--config", bad, "config", "check"]) == 1
    out = capsys.readouterr().out
    assert "model.loras: error: unknown LoRA 'missing'" in out and "model.loras: error: unknown LoRA 'nope'" in out
