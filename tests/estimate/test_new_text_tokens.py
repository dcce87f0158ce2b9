"""``frame estimate --new-texts N --new-text-tokens T`` counts the picker's passes as it runs them:
through the longest new text's end-of-text, in shared passes as large as that length allows
(without ``--new-text-tokens`` the texts are counted padded to 77 positions: an upper bound)."""

from __future__ import annotations

import json

import pytest

from frame.cli.program import main


def _estimate(tmp_path, capsys, *extra: str) -> dict:
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  source: demo\n  size: 64x64\n  steps: 2\n")
    assert main(["estimate", "--config", str(config), "--measure-seconds", "0.2", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_new_text_tokens_counts_one_shared_pass_instead_of_padded_passes(tmp_path, capsys):
    padded = _estimate(tmp_path, capsys, "--new-texts", "10")
    short = _estimate(tmp_path, capsys, "--new-texts", "10", "--new-text-tokens", "5")
    queued = _estimate(tmp_path, capsys, "--queued")
    padded_choose = padded["bytes_per_night"] - queued["bytes_per_night"]
    short_choose = short["bytes_per_night"] - queued["bytes_per_night"]
    # 10 texts at 77 positions: 3 passes of at most 4, each reading the encoder's weights; at 5
    # positions: one pass of 10, reading them once (and fewer rows of the token embedding table)
    assert 0 < short_choose <= padded_choose / 3


@pytest.mark.parametrize("extra", [("--new-text-tokens", "12"), ("--new-texts", "10", "--new-text-tokens", "78"),
                                   ("--new-texts", "10", "--new-text-tokens", "1")])
def test_new_text_tokens_outside_its_range_or_alone_is_a_usage_error(tmp_path, capsys, extra):
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n")
    assert main(["estimate", "--config", str(config), *extra]) != 0
    assert "--new-text-tokens" in capsys.readouterr().err
