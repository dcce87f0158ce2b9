"""``frame config check`` reuses this machine's recent measurement kept in the state folder (issue 29
item 25: it measured on every call, 13 s here and far longer on a Pi, and the installer runs it)."""

from __future__ import annotations

import dataclasses

import pytest

from frame.cli.program import main
from frame.estimate import configured, rates_file
from frame.estimate.machine import Throughput
from frame.estimate.signature import Signature

SIG = Signature("conv", ((1, 4, 8, 8), (4, 4, 3, 3)), (("pads", (1, 1, 1, 1)), ("group", 1)), "fp16")
RATES = Throughput(2e9, 4e9, 1e-5, {"conv": 1e9, "matmul": 1.5e9, "attention": 1.2e9}, {SIG: 9e8}, 5e8, 0.9,
                   2.5, "this machine", {"conv": 9e8}, {"fp16": 1e-9})


def test_a_kept_measurement_reads_back_as_it_was(tmp_path):
    rates_file.save_rates(tmp_path, RATES, now=1000.0)
    assert rates_file.load_rates(tmp_path, {SIG}, now=1000.0 + 3600) == RATES
    other = dataclasses.replace(SIG, storage="uint8")
    assert rates_file.load_rates(tmp_path, {SIG, other}, now=1000.0 + 3600) is None  # another model's steps
    assert rates_file.load_rates(tmp_path, {SIG}, now=1000.0 + rates_file.MAX_AGE_SECONDS + 1) is None  # too old
    assert rates_file.load_rates(tmp_path, {SIG}, now=900.0) is None  # from the future: the clock moved


def test_a_damaged_file_means_measure_and_nothing_is_created_without_the_folder(tmp_path):
    (tmp_path / rates_file.FILE).write_text('{"sha256": "x", "data": {"trunc')
    assert rates_file.load_rates(tmp_path, set()) is None
    rates_file.save_rates(tmp_path / "missing", RATES)
    assert not (tmp_path / "missing").exists()
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / rates_file.FILE).mkdir()  # cannot be replaced by a file, even by root
    rates_file.save_rates(locked, RATES)  # no error: only not kept


def test_config_check_measures_once_then_reuses_the_kept_measurement(tmp_path, capsys, monkeypatch):
    state = tmp_path / "state"
    state.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {state}\nmodel:\n  size: 64x64\n  steps: 2\n", encoding="utf-8")
    measured = []
    real = configured.measure_throughput

    def counting(*args, **kwargs):
        measured.append(1)
        return real(*args, **{**kwargs, "budget_seconds": 0.2})

    monkeypatch.setattr(configured, "measure_throughput", counting)
    assert main(["config", "check", str(config)]) == 0
    first = [line for line in capsys.readouterr().out.splitlines() if line.startswith("estimate: this machine:")]
    assert measured == [1] and (state / rates_file.FILE).is_file()
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    again = [line for line in out.splitlines() if line.startswith("estimate: this machine:")]
    assert measured == [1], "the second check measured again"
    # the same rates (the night's total also holds the load time counting just took)
    assert again[0].split("; measured")[1] == first[0].split("; measured")[1] and "reuse its measurement kept in" in out
    assert main(["--config", str(config), "estimate", "--measure-seconds", "0.2"]) == 0  # always measures
    assert measured == [1, 1]


@pytest.fixture(autouse=True)
def _quiet_logs(caplog):
    caplog.set_level("WARNING")
