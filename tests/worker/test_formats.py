"""Files written by frame 0.1 (main 7de3f48) still read, and an interrupted render resumes.

``tests/fixtures/formats/`` holds what the daemon and the worker left on disk on 7de3f48 (captured by
plan-15's ``plan15_capture_formats.py``; images dropped): nine job folders (render, show and info
screen) with the worker's events and the supervisor's outcome, the state folder's ``frame.db``, and a
6-step render whose worker was SIGKILLed right after step 3's checkpoint (``interrupted/``). Issue 15
moves the code that reads them into typed records (``frame.worker.records``); these tests prove a
render cut by the upgrade continues under the new code and that every file reads as a record whose
``to_json`` keeps every key with its value (so a 0.1 reader can still read what this code writes).
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import frame
from frame.daemon.store.database import Store
from frame.statefile import read_json, write_json
from frame.worker.events import (
    DoneEvent,
    Generation,
    RenderOutput,
    ShowOutput,
    event_json,
    output_from_json,
    parse_event,
)
from frame.worker.records import RenderJob, ShowJob, ThemeChoice, read_job

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
JOBS = sorted((FORMATS / "jobs").iterdir())
RENDER_JOBS = [job for job in JOBS if "-render-" in job.name]
SHOW_JOBS = [job for job in JOBS if "-render-" not in job.name]
# The model sat here when the checkpoint was written: its path is part of the parameter hash
# (frame.diffusion.model_files.ModelFiles.identity), so the resume test puts the demo model there.
CAPTURED_MODEL = Path("/tmp/frame-formats-7de3f48/demo")

EVENTS = {"stage", "progress", "error", "done"}


def _keeps(old: dict, new: dict) -> None:
    """``new`` has every key of ``old`` with the same value (it may add keys a 0.1 reader ignores)."""
    missing = set(old) - set(new)
    assert not missing, f"keys lost: {sorted(missing)}"
    changed = {key for key in old if new[key] != old[key]}
    assert not changed, f"values changed: {sorted(changed)}"


def test_the_fixture_is_from_0_1():
    assert (FORMATS / "VERSION").read_text().strip().startswith("7de3f48")
    assert len(RENDER_JOBS) == 4 and len(SHOW_JOBS) == 5


@pytest.mark.parametrize("job", RENDER_JOBS, ids=lambda job: job.name)
def test_render_job_files_read_as_records_and_write_the_same_keys(job):
    folder = job / "folder"
    data = read_json(folder / "job.json")
    assert data is not None, "checksum or JSON of a 0.1 job.json no longer accepted"
    record = read_job(folder)
    assert isinstance(record, RenderJob) and record.seed == data["seed"]
    _keeps(data, record.to_json())
    assert RenderJob.from_json(record.to_json()) == record
    choice = read_json(folder / "choice.json")
    _keeps(choice, ThemeChoice.from_json(choice).to_json())
    assert ThemeChoice.from_json(choice).why.sentence
    generation = read_json(folder / "generation.json")
    _keeps(generation, Generation.from_json(generation).to_json())
    assert {"choose", "generate", "prepare"} <= set(read_json(folder / "timings.json"))


@pytest.mark.parametrize("job", SHOW_JOBS, ids=lambda job: job.name)
def test_show_job_files_read_as_records_and_write_the_same_keys(job):
    data = read_json(job / "folder" / "job.json")
    record = read_job(job / "folder")
    assert isinstance(record, ShowJob) and (record.info is not None) == ("-info-" in job.name)
    _keeps(data, record.to_json())
    if record.info is not None:
        _keeps(data["info"], record.info.to_json())
        assert record.info.details and record.info.url


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.name)
def test_worker_events_and_results_read_as_records(job):
    lines = (job / "events.jsonl").read_text().splitlines()
    for line in lines:
        old = json.loads(line)
        event = parse_event(line)
        assert old["event"] in EVENTS and event is not None, line
        _keeps(old, event_json(event))
    done = parse_event(lines[-1])
    assert isinstance(done, DoneEvent)
    assert isinstance(done.result, RenderOutput if "-render-" in job.name else ShowOutput)
    outcome = json.loads((job / "outcome.json").read_text())
    assert outcome["status"] == "done"
    _keeps(outcome["result"], output_from_json(outcome["result"]).to_json())


def test_the_interrupted_job_reads_as_a_record():
    folder = FORMATS / "interrupted" / "folder"
    job = read_job(folder)
    assert isinstance(job, RenderJob) and job.candidates and (folder / "diffusion" / "render-state.bin").is_file()
    _keeps(read_json(folder / "job.json"), job.to_json())


def test_the_0_1_database_opens_with_every_picture(tmp_path):
    shutil.copytree(FORMATS / "state", tmp_path / "state")
    store = Store.open(tmp_path / "state")
    try:
        pictures = store.pictures()
        assert len(pictures) == 4
        assert all(picture.prompt and picture.file for picture in pictures)
        assert store.picture(pictures[0].id).why["sentence"]
    finally:
        store.close()


def _place_once(source: Path, target: Path) -> None:
    """Copy the folder ``source`` to ``target`` unless ``target`` is there already.

    ``target`` is a fixed path in /tmp that every test run on this machine shares (xdist workers, two
    checkouts' suites at once). A plain ``exists()`` then ``copytree()`` let a second run either fail
    with FileExistsError or see a half-copied model; here each run copies into its own folder beside
    ``target`` and renames it into place (atomic), and a run that loses the race uses the winner's copy.
    """
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        try:
            os.rename(staging, target)
        except OSError:  # ENOTEMPTY/EEXIST: another run put its whole copy there first
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def test_a_run_never_uses_a_half_copied_model_another_run_is_placing(tmp_path, monkeypatch):
    """Run A is half-way through copying when run B (another xdist worker or checkout) needs the model:
    B must get the whole model, and A's late copy must neither fail nor be left behind."""
    source = tmp_path / "source"
    for part in ("text_encoder", "unet", "vae_decoder"):
        (source / part).mkdir(parents=True)
        (source / part / "model.onnx").write_bytes(part.encode() * 100)
    target = tmp_path / "shared" / "demo"
    real_copytree, seen_by_b = shutil.copytree, []

    def copytree_interrupted_by_run_b(src, dst, **options):
        monkeypatch.setattr(shutil, "copytree", real_copytree)  # run B copies normally
        Path(dst).mkdir(parents=True, exist_ok=True)
        real_copytree(Path(src) / "text_encoder", Path(dst) / "text_encoder")  # A is half-way
        _place_once(source, target)  # run B
        seen_by_b.append(sorted(path.name for path in target.iterdir()))
        return real_copytree(src, dst, dirs_exist_ok=True)  # A finishes

    monkeypatch.setattr(shutil, "copytree", copytree_interrupted_by_run_b)
    _place_once(source, target)  # run A
    assert seen_by_b == [["text_encoder", "unet", "vae_decoder"]]
    assert os.listdir(target.parent) == ["demo"]  # A's staging copy is gone
    assert (target / "unet" / "model.onnx").read_bytes() == b"unet" * 100


IDENTITY_FILES = ("model_index.json", "scheduler/scheduler_config.json", "unet/config.json", "unet/model.onnx")


def _place_current(source: Path, target: Path) -> None:
    """``_place_once``, but a copy left by an older checkout whose model files differ from ``source``'s
    is moved aside first: such a copy once kept the resume test passing on the machines that had it
    while a fresh machine failed (the demo's model_index.json had changed)."""
    if target.exists() and not all(filecmp.cmp(source / name, target / name, shallow=False)
                                   for name in IDENTITY_FILES if (source / name).exists()):
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}-stale-", dir=target.parent))
        try:
            os.rename(target, aside / target.name)
        except FileNotFoundError:  # another run moved it first
            pass
        shutil.rmtree(aside, ignore_errors=True)
    _place_once(source, target)


def _prepare_interrupted_job(tmp_path: Path) -> Path:
    if CAPTURED_MODEL.exists() and not (CAPTURED_MODEL / "unet").is_dir():
        pytest.skip(f"{CAPTURED_MODEL} exists but is not the demo model")
    _place_current(Path(frame.__file__).parent / "models" / "demo", CAPTURED_MODEL)
    job_dir = tmp_path / "job"
    shutil.copytree(FORMATS / "interrupted" / "folder", job_dir)
    job = read_json(job_dir / "job.json")
    job["state_dir"] = str(tmp_path / "state")
    (tmp_path / "state").mkdir()
    write_json(job_dir / "job.json", job)  # the 0.1 file as it was, only moved: the worker reads it
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
