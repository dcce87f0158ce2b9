"""Files written by frame 0.1 (main 7de3f48) still read, and an interrupted render resumes.

``tests/fixtures/formats/`` holds what the daemon and the worker left on disk on 7de3f48 (captured by
plan-15's ``plan15_capture_formats.py``; images dropped): nine job folders (render, show and info
screen) with the worker's events and the supervisor's outcome, the state folder's ``frame.db``, and a
6-step render whose worker was SIGKILLed right after step 3's checkpoint (``interrupted/``). Issue 15
moves the code that reads them; these tests prove a render cut by the upgrade continues under the new
code and that every file keeps the keys its readers use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import frame
from frame.daemon.store.database import Store
from frame.statefile import read_json, write_json

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
JOBS = sorted((FORMATS / "jobs").iterdir())
RENDER_JOBS = [job for job in JOBS if "-render-" in job.name]
SHOW_JOBS = [job for job in JOBS if "-render-" not in job.name]
# The model sat here when the checkpoint was written: its path is part of the parameter hash
# (frame.diffusion.model_files.ModelFiles.identity), so the resume test puts the demo model there.
CAPTURED_MODEL = Path("/tmp/frame-formats-7de3f48/demo")

RENDER_JOB_KEYS = {"kind", "render_kind", "render_id", "state_dir", "seed", "choice", "candidates", "history",
                   "recent_themes"}
SHOW_JOB_KEYS = {"kind", "state_dir", "image", "panel"}
CHOICE_KEYS = {"prompt", "negative_prompt", "theme", "style", "origin", "why"}
GENERATION_KEYS = {"steps", "guidance", "sampler", "width", "height", "model"}
TIMING_KEYS = {"choose", "generate", "prepare"}
EVENTS = {"stage", "progress", "error", "done"}


def test_the_fixture_is_from_0_1():
    assert (FORMATS / "VERSION").read_text().strip().startswith("7de3f48")
    assert len(RENDER_JOBS) == 4 and len(SHOW_JOBS) == 5


@pytest.mark.parametrize("job", RENDER_JOBS, ids=lambda job: job.name)
def test_render_job_files_keep_their_keys(job):
    data = read_json(job / "folder" / "job.json")
    assert data is not None, "checksum or JSON of a 0.1 job.json no longer accepted"
    assert data["kind"] == "render" and RENDER_JOB_KEYS <= set(data)
    for candidate in data["candidates"]:
        assert {"prompt", "theme", "style", "weight", "origin"} <= set(candidate)
    choice = read_json(job / "folder" / "choice.json")
    assert CHOICE_KEYS <= set(choice) and {"method", "sentence"} <= set(choice["why"])
    assert GENERATION_KEYS <= set(read_json(job / "folder" / "generation.json"))
    assert TIMING_KEYS <= set(read_json(job / "folder" / "timings.json"))


@pytest.mark.parametrize("job", SHOW_JOBS, ids=lambda job: job.name)
def test_show_job_files_keep_their_keys(job):
    data = read_json(job / "folder" / "job.json")
    assert data is not None and data["kind"] == "show" and SHOW_JOB_KEYS <= set(data)
    if "-info-" in job.name:
        assert {"picture_id", "image", "title", "prompt", "details", "why", "url"} <= set(data["info"])


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.name)
def test_worker_events_are_the_protocol(job):
    lines = (job / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert {event["event"] for event in events} <= EVENTS
    assert events[-1]["event"] == "done"
    outcome = json.loads((job / "outcome.json").read_text())
    assert outcome["status"] == "done"


def test_the_0_1_database_opens_with_every_picture(tmp_path):
    shutil.copytree(FORMATS / "state", tmp_path / "state")
    store = Store.open(tmp_path / "state")
    try:
        pictures = store.pictures()
        assert len(pictures) == 4
        assert all(picture["prompt"] and picture["file"] for picture in pictures)
        assert store.picture(pictures[0]["id"])["why"]["sentence"]
    finally:
        store.close()


def _prepare_interrupted_job(tmp_path: Path) -> Path:
    if CAPTURED_MODEL.exists() and not (CAPTURED_MODEL / "unet").is_dir():
        pytest.skip(f"{CAPTURED_MODEL} exists but is not the demo model")
    if not CAPTURED_MODEL.exists():
        shutil.copytree(Path(frame.__file__).parent / "models" / "demo", CAPTURED_MODEL)
    job_dir = tmp_path / "job"
    shutil.copytree(FORMATS / "interrupted" / "folder", job_dir)
    job = read_json(job_dir / "job.json")
    job["state_dir"] = str(tmp_path / "state")
    (tmp_path / "state").mkdir()
    write_json(job_dir / "job.json", job)
    return job_dir


def test_resume_of_a_render_interrupted_by_0_1(tmp_path):
    """The worker continues the 0.1 checkpoint at step 4 (a fresh start would show step 1)."""
    job_dir = _prepare_interrupted_job(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(frame.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-m", "frame.worker.render", str(job_dir)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    previews = [event["step"] for event in events if event["event"] == "progress" and event.get("preview")]
    assert previews[0] == 4, f"started at step {previews[0]}: the 0.1 checkpoint was not resumed"
    assert events[-1]["event"] == "done"
    assert "resuming from step 3" in done.stderr
