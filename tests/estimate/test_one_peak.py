"""Issue 40 item 20: the settings page and ``frame estimate`` gave the same settings two peaks (217 MB
against 138 MB for the demo night). The page shows what tonight's step choice wrote, which knew nothing
of the ratings and so added the taste model's 79 MB to the VAE's peak; ``frame estimate`` counted the
store's ratings (none: no taste model). The taste model runs in its own short child, gone before any
component loads, so it adds nothing, and both paths now write the same peak."""

from __future__ import annotations

import time

from frame.cli.program import main
from frame.config import load_config
from frame.daemon.store.database import Store
from frame.diffusion.configured import pipeline_setup
from frame.estimate.configured import estimate_config
from frame.statefile import read_json
from frame.worker.step_choice import night_steps

CONFIG = "state_dir: {state}\nmodel:\n  source: demo\n  steps: 3\n"


def test_tonights_estimate_and_frame_estimate_give_one_peak(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(state=state), encoding="utf-8")
    config = load_config(str(path))
    Store.open(state).close()  # a frame that has run: its store says no picture is rated yet
    assert main(["--config", str(path), "estimate", "--state-dir", str(tmp_path), "--measure-seconds", "0.5"]) == 0
    command = read_json(tmp_path / "estimate.json")
    pipe = pipeline_setup(config).load()
    job = tmp_path / "job"
    job.mkdir()
    night_steps(config, pipe, (672, 400), time.time() + 3600, job, state_dir=state, texts=13)
    night = read_json(state / "estimate.json")
    assert night["origin"] == "tonight's render" and night["size"] == command["size"] == "672x400"
    assert night["peak_bytes"] == command["peak_bytes"]
    peak = [line for line in night["lines"] if line.startswith("peak memory:")]
    assert peak == [line for line in command["lines"] if line.startswith("peak memory:")], peak


def test_the_peak_does_not_depend_on_the_ratings(tmp_path):
    config = load_config(None)
    config = type(config)(**{**config.__dict__, "state_dir": str(tmp_path)})
    peaks = {ratings: estimate_config(config, measure_seconds=0.3, ratings=ratings, alternative=False)
             .estimate.peak_bytes for ratings in (None, 0, 50)}
    assert len(set(peaks.values())) == 1, peaks
