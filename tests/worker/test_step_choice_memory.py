"""The night's step-choice child stays small (issue 27, the Pi twin): it runs while the render worker
waits with the pipeline open and the daemon beside it, so its own peak is part of the night's. On
the demo model it peaked at 187 MiB (x86), 110 of them the machine measurement's element probe, and
was OOM-killed in the Pi twin's 512 MB budget."""

from __future__ import annotations

import time

import numpy as np

from frame.config import Config
from frame.daemon.jobs.night import write_job_files
from frame.estimate import machine
from frame.estimate.rates_file import FILE
from frame.worker import step_choice
from frame.worker.records import RenderJob

CHILD_PEAK_MIB = 140  # measured 112 MiB (demo model, x86, measuring); 187 before the smaller element probe
PROBE_INPUT_BYTES = 24 << 20  # 21 MB now (four 5.2 MB inputs); 65 MB before


def _job(tmp_path, name: str = "job"):
    job_dir = tmp_path / name
    job_dir.mkdir()
    write_job_files(job_dir, Config(state_dir=str(tmp_path)),
                    RenderJob(render_id=1, render_kind="night", state_dir=tmp_path, seed=1,
                              deadline=time.time() + 6 * 3600))
    return job_dir


def test_the_element_probe_streams_tensors_that_fit_beside_the_render_worker():
    proto, feeds = machine.element_probe(np.random.default_rng(0))
    assert sum(array.nbytes for array in feeds.values()) <= PROBE_INPUT_BYTES
    assert min(array.nbytes for array in feeds.values()) > 4 * (512 << 10)  # still far beyond a Pi's L2


def test_the_real_step_choice_child_saves_its_own_peak_within_bounds(tmp_path):
    """The child measures this machine (no kept measurement yet) and says what it held."""
    job_dir = _job(tmp_path)
    choice = step_choice.night_steps_in_child(job_dir, (256, 160), timeout=300)
    assert choice.steps == 8
    peak = step_choice.saved_peak_mb(job_dir)
    assert peak is not None and 30 < peak <= CHILD_PEAK_MIB, peak
    assert (tmp_path / FILE).is_file()  # the measurement is kept for the next nights


def test_a_night_reuses_the_kept_measurement_instead_of_probing_again(tmp_path, monkeypatch):
    from frame.config import load_config
    from frame.diffusion.configured import load_configured_pipeline

    monkeypatch.setattr(step_choice, "MEASURE_SECONDS", 0.2)
    first = _job(tmp_path, "first")
    config = load_config(first / "config.yaml", environ={})
    pipe = load_configured_pipeline(config)
    step_choice.night_steps(config, pipe, (256, 160), time.time() + 6 * 3600, first, tmp_path, texts=0)
    assert (tmp_path / FILE).is_file()

    def no_probes(*args, **kwargs):
        raise AssertionError("measured again although a recent measurement is kept")

    import frame.estimate.configured as configured

    monkeypatch.setattr(configured, "measure_throughput", no_probes)
    second = _job(tmp_path, "second")
    choice = step_choice.night_steps(config, pipe, (256, 160), time.time() + 6 * 3600, second, tmp_path, texts=0)
    assert choice is not None and choice.steps == 8
