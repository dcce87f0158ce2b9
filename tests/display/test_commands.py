"""The CLI handlers, through a parser built the way frame/cli/program/main.py builds it."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from PIL import Image

from frame.cli import display as commands
from frame.errors import UsageError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frame")
    parser.add_argument("--config")
    parser.add_argument("--debug", action="store_true")
    commands.register(parser.add_subparsers(dest="command", required=True))
    return parser


@pytest.fixture
def config(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ndisplay:\n  size: 120x72\n")
    monkeypatch.delenv("FRAME_CONFIG", raising=False)
    return path


def _run(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    return args.func(args)


def test_show_writes_the_virtual_panel_to_out(tmp_path, config, capsys) -> None:
    picture = tmp_path / "in.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (50, 80, 3), dtype=np.uint8)).save(picture)
    out = tmp_path / "out" / "shown.png"
    assert _run("--config", str(config), "show", str(picture), "--out", str(out), "--fit", "contain",
                "--dither", "atkinson", "--saturation", "0.5") == 0
    assert Image.open(out).size == (120, 72)
    assert (tmp_path / "out" / "shown-preview.png").exists()
    assert "wrote" in capsys.readouterr().out


def test_show_without_out_uses_the_state_dir_and_skips_unchanged(tmp_path, config, capsys) -> None:
    picture = tmp_path / "in.png"
    Image.new("RGB", (30, 20), (10, 120, 200)).save(picture)
    assert _run("--config", str(config), "show", str(picture)) == 0
    assert (tmp_path / "state" / "display" / "panel.png").exists()
    assert _run("--config", str(config), "show", str(picture)) == 0
    assert "same picture" in capsys.readouterr().out


def test_display_test_draws_one_bar_per_ink_and_a_ramp(tmp_path, config) -> None:
    out = tmp_path / "bars.png"
    assert _run("--config", str(config), "display", "test", "--out", str(out)) == 0
    shown = np.asarray(Image.open(out).convert("RGB"))
    inks = [tuple(ink) for ink in __import__("frame.display", fromlist=["x"]).get_panel("virtual").palette]
    bar_row = [tuple(p) for p in shown[10]]
    assert [bar_row[i * 20 + 10] for i in range(6)] == inks  # 120 px / 6 inks
    assert len({tuple(p) for p in shown[-5]}) >= 2  # the ramp is dithered


def test_bad_panel_and_unreadable_image_are_clear(tmp_path, config) -> None:
    with pytest.raises(UsageError, match="did you mean"):
        _run("--config", str(config), "show", str(tmp_path / "x.png"), "--panel", "virtal")
    from frame.errors import FrameError

    with pytest.raises(FrameError, match=r"x\.png: no such file"):
        _run("--config", str(config), "show", str(tmp_path / "x.png"))


def test_show_too_soon_exits_1_with_the_wait(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ndisplay:\n  size: 60x36\n  min_refresh_seconds: 180\n")
    monkeypatch.delenv("FRAME_CONFIG", raising=False)
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    Image.new("RGB", (30, 20), (200, 30, 30)).save(first)
    Image.new("RGB", (30, 20), (30, 30, 200)).save(second)
    assert _run("--config", str(path), "show", str(first)) == 0
    assert _run("--config", str(path), "show", str(second)) == 1
    assert "needs 180 s between refreshes" in capsys.readouterr().err
