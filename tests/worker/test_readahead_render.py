"""The render reads each component's weights as far ahead as tonight's estimate counted
(``frame.diffusion.readahead``): the step choice saves the budgets, the render worker hands them to
the pipeline, and each component's provider reads ahead within them. Demo model, in-process render."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from frame.daemon.jobs.night import write_job_files
from frame.diffusion import RenderPlan, load_pipeline
from frame.engine.model import Model
from frame.estimate import configured
from frame.estimate.machine import Throughput
from frame.models import demo_model_path
from frame.worker import step_choice as nightly
from frame.worker.records import JobCandidate, RenderJob
from frame.worker.render import run_render
from tests.daemon.conftest import make_config

MB = 1 << 20
RATES = Throughput(2e9, 4e9, 1e-5, {"conv": 2e9, "matmul": 2e9, "attention": 2e9}, read_bytes=50e6)


def _night(tmp_path: Path, limit: int, monkeypatch) -> tuple[dict[str, int], dict[str, int]]:
    """(budgets tonight's step choice saved, read-ahead bytes each component's provider had when the
    render set it) for a night of the demo model under a ``limit`` MB worker."""
    monkeypatch.setattr(configured, "measure_throughput", lambda *args, **kwargs: RATES)
    state = tmp_path / "state"
    state.mkdir()
    config = make_config(state, model={"source": "demo", "size": "64x64", "steps": 2},
                         display={"panel": "virtual", "size": "80x48"}, worker={"memory_limit_mb": limit})
    job = RenderJob(render_id=1, render_kind="night", state_dir=state, seed=7, deadline=time.time() + 3600,
                    candidates=(JobCandidate(prompt="a red fox", theme="a red fox", style="", weight=1.0,
                                             origin="theme"),))
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    write_job_files(job_dir, config, job)
    # the step-choice child's work, in this process (its saved choice is what the worker then reads)
    nightly.night_steps(config, load_pipeline(demo_model_path(), plan=RenderPlan(memory_limit_mb=limit)), (64, 64),
                        job.deadline, job_dir, state)
    seen: dict[str, int] = {}
    original = Model.set_readahead

    def recorded(model, budget_bytes):
        applied = original(model, budget_bytes)
        seen[Path(str(model.source)).parent.name] = model.provider.budget_bytes
        return applied

    monkeypatch.setattr(Model, "set_readahead", recorded)
    run_render(job, config, job_dir, lambda event: None)
    return nightly.saved_readahead(job_dir), seen


def test_the_render_reads_ahead_what_the_estimate_counted(tmp_path, monkeypatch):
    saved, seen = _night(tmp_path, 440, monkeypatch)
    assert saved == {"unet": 32 * MB, "text_encoder": 32 * MB, "vae_decoder": 32 * MB}
    assert seen == saved  # each component's provider, as the render loaded it


@pytest.mark.parametrize("limit", [150])
def test_no_room_keeps_the_default(tmp_path, monkeypatch, limit):
    saved, seen = _night(tmp_path, limit, monkeypatch)
    assert saved == {} and seen == {}


def test_a_budget_saved_by_another_version_or_damaged_is_ignored(tmp_path):
    from frame.statefile import write_json

    write_json(tmp_path / nightly.CHOICE_FILE, {"steps": 2, "readahead_bytes": {"unet": "lots", "vae_decoder": -1,
                                                                                "text_encoder": True}})
    assert nightly.saved_readahead(tmp_path) == {}
    write_json(tmp_path / nightly.CHOICE_FILE, {"steps": 2, "readahead_bytes": [1, 2]})
    assert nightly.saved_readahead(tmp_path) == {}
