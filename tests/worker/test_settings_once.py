"""The night's render settings take one road (issue 30, item 2): the worker resolves them once with
``Pipeline.settings`` and hands that record to ``generate``, so each value is checked once and each
warning is logged once (``generate`` used to resolve the same values again: two checks, two warnings).
The seed is the job's: decided when the job was made and stored in ``job.json``."""

from __future__ import annotations

import logging
from pathlib import Path

from PIL import Image

from frame.daemon.jobs.night import write_job_files
from frame.diffusion import rules
from frame.diffusion.rules import Finding
from frame.worker.records import JobCandidate, RenderJob
from frame.worker.render import run_render
from tests.daemon.conftest import make_config

WARNING = "a warning the model's rules give for these settings"


def test_the_night_checks_its_settings_once_and_warns_once(tmp_path: Path, monkeypatch, caplog):
    real = rules.generation_findings
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("steps"))
        return [*real(*args, **kwargs), Finding("steps", WARNING, warning=True)]

    monkeypatch.setattr(rules, "generation_findings", counted)
    state = tmp_path / "state"
    config = make_config(state, model={"source": "demo", "size": "64x64", "steps": 2},
                         display={"panel": "virtual", "size": "80x48"})
    job = RenderJob(render_id=1, render_kind="now", state_dir=state, seed=4321,
                    candidates=(JobCandidate(prompt="a red fox", theme="a red fox", style="", weight=1.0,
                                             origin="theme"),))
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    write_job_files(job_dir, config, job)
    caplog.set_level(logging.WARNING, logger="frame.diffusion.pipeline")

    out = run_render(job, config, job_dir, lambda event: None)

    assert calls == [2]
    assert [r.getMessage() for r in caplog.records].count(WARNING) == 1
    parameters = Image.open(out.image).info["parameters"]
    assert "Steps: 2," in parameters and "Seed: 4321," in parameters  # the job's seed, as stored in job.json
