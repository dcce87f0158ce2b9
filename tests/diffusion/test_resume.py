"""Resume after power loss: checkpoint file integrity, and renders that survive crashes and SIGKILL."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from frame.diffusion import load_pipeline
from frame.diffusion.resume import FILENAME, Checkpoint, ResumeStore
from frame.models import demo_model_path
from tests.painting import paint

ROOT = Path(__file__).resolve().parents[2]
SIZE = dict(width=64, height=64)


def _checkpoint() -> Checkpoint:
    rng = np.random.Generator(np.random.PCG64(7))
    rng.standard_normal(10)
    return Checkpoint(3, np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2),
                      {"previous_x0": np.ones((1, 4, 2, 2), np.float32)}, rng.bit_generator.state)


def test_checkpoint_round_trip(tmp_path):
    store = ResumeStore(tmp_path, "abc")
    store.save(_checkpoint())
    loaded = ResumeStore(tmp_path, "abc").load()
    assert loaded is not None and loaded.step == 3
    assert np.array_equal(loaded.latents, _checkpoint().latents)
    assert np.array_equal(loaded.history["previous_x0"], np.ones((1, 4, 2, 2)))
    assert loaded.rng_state == _checkpoint().rng_state
    assert [p.name for p in tmp_path.iterdir()] == [FILENAME]  # no temporary file left behind
    store.clear()
    assert ResumeStore(tmp_path, "abc").load() is None


def test_clear_removes_a_temporary_left_by_a_killed_writer(tmp_path):
    store = ResumeStore(tmp_path, "abc")
    store.save(_checkpoint())
    (tmp_path / f".{FILENAME}.tmp-12345-67890").write_bytes(b"torn")
    store.clear()
    assert list(tmp_path.iterdir()) == []


def test_other_parameters_start_fresh(tmp_path):
    ResumeStore(tmp_path, "abc").save(_checkpoint())
    assert ResumeStore(tmp_path, "different").load() is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_damaged_checkpoint_is_detected(tmp_path, caplog, damage):
    ResumeStore(tmp_path, "abc").save(_checkpoint())
    path = tmp_path / FILENAME
    blob = bytearray(path.read_bytes())
    if damage == "flip":
        blob[len(blob) // 2] ^= 0x01
    elif damage == "truncate":
        blob = blob[: len(blob) - 100]
    elif damage == "garbage":
        blob = bytearray(b"not a checkpoint at all")
    else:
        blob = bytearray()
    path.write_bytes(bytes(blob))
    with caplog.at_level(logging.WARNING):
        assert ResumeStore(tmp_path, "abc").load() is None
    assert any("damaged" in r.getMessage() for r in caplog.records)


class Crash(Exception):
    pass


def _crash_after(step: int):
    def callback(progress):
        if progress.step_done and progress.step == step:
            raise Crash()
    return callback


@pytest.mark.parametrize(("sampler", "noise"), [("dpm++2m", "frame"), ("euler_a", "frame"), ("euler_a", "torch-cpu"),
                                              ("euler_a", "a1111-nv")])
def test_render_resumes_after_a_crash_bit_identically(tmp_path, sampler, noise):
    pipe = load_pipeline(demo_model_path())
    args = dict(steps=5, sampler=sampler, seed=11, noise=noise, **SIZE)
    straight = np.asarray(paint(pipe, "a lighthouse", **args))
    with pytest.raises(Crash):
        paint(pipe, "a lighthouse", callback=_crash_after(3), resume_dir=tmp_path, **args)
    seen = []
    resumed = paint(pipe, "a lighthouse", resume_dir=tmp_path, callback=seen.append, **args)
    assert [e.step for e in seen if e.step_done] == [4, 5]  # continued after step 3
    assert np.array_equal(np.asarray(resumed), straight)
    assert not (tmp_path / FILENAME).exists()  # cleared when finished


def test_changed_parameters_do_not_mix(tmp_path):
    pipe = load_pipeline(demo_model_path())
    with pytest.raises(Crash):
        paint(pipe, "a lighthouse", steps=4, seed=1, callback=_crash_after(2), resume_dir=tmp_path, **SIZE)
    seen = []
    other = paint(pipe, "a lighthouse", steps=4, seed=2, resume_dir=tmp_path, callback=seen.append, **SIZE)
    assert [e.step for e in seen if e.step_done] == [1, 2, 3, 4]
    assert np.array_equal(np.asarray(other), np.asarray(paint(pipe, "a lighthouse", steps=4, seed=2, **SIZE)))


def test_a_checkpoint_of_another_noise_source_is_not_continued(tmp_path):
    pipe = load_pipeline(demo_model_path())
    args = dict(steps=4, seed=3, sampler="euler_a", **SIZE)
    with pytest.raises(Crash):
        paint(pipe, "a lighthouse", callback=_crash_after(2), resume_dir=tmp_path, noise="torch-cpu", **args)
    seen = []
    other = paint(pipe, "a lighthouse", resume_dir=tmp_path, callback=seen.append, noise="a1111-nv", **args)
    assert [e.step for e in seen if e.step_done] == [1, 2, 3, 4]
    assert np.array_equal(np.asarray(other), np.asarray(paint(pipe, "a lighthouse", noise="a1111-nv", **args)))


def _render(out: Path, resume: Path | None, extra_env=None) -> subprocess.Popen:
    command = [sys.executable, "-m", "frame", "render", "--model", str(demo_model_path()), "--prompt",
               "a storm at sea", "--steps", "12", "--seed", "4", "--sampler", "euler_a", "--size", "64x64",
               "--out", str(out)]
    if resume is not None:
        command += ["--resume", str(resume)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})}
    env.pop("FRAME_CONFIG", None)
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(state: Path, process: subprocess.Popen, after_mtime: float, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            mtime = state.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = 0
        if mtime > after_mtime:
            return mtime
        assert process.poll() is None, process.communicate()
        time.sleep(0.005)
    raise AssertionError("no checkpoint written in time")


def test_sigkill_at_random_moments_then_resume_gives_identical_png(tmp_path):
    reference = _render(tmp_path / "reference.png", None)
    assert reference.wait(timeout=120) == 0, reference.communicate()

    state_dir, state = tmp_path / "state", tmp_path / "state" / FILENAME
    rng = random.Random(1)
    mtime = 0
    for _ in range(2):  # two power cuts, each a random moment after a new checkpoint appeared
        victim = _render(tmp_path / "out.png", state_dir)
        mtime = _wait_for_checkpoint(state, victim, mtime)
        time.sleep(rng.uniform(0.0, 0.05))  # well inside the remaining steps, even on a fast machine
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        assert victim.returncode == -signal.SIGKILL
        assert not (tmp_path / "out.png").exists()
    final = _render(tmp_path / "out.png", state_dir)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert "resuming from step" in err
    a = np.asarray(Image.open(tmp_path / "reference.png"))
    b = np.asarray(Image.open(tmp_path / "out.png"))
    assert np.array_equal(a, b)
    assert not state.exists()


def test_crash_while_decoding_resumes_straight_to_the_decoder(tmp_path):
    pipe = load_pipeline(demo_model_path())
    args = dict(steps=3, seed=5, **SIZE)
    straight = np.asarray(paint(pipe, "a quiet harbour", **args))

    def crash_in_vae(progress):
        if progress.phase == "vae":
            raise Crash()

    with pytest.raises(Crash):
        paint(pipe, "a quiet harbour", callback=crash_in_vae, resume_dir=tmp_path, **args)
    phases = []
    resumed = paint(pipe, "a quiet harbour", resume_dir=tmp_path, callback=lambda p: phases.append(p.phase), **args)
    assert set(phases) == {"vae"}  # no text encoding, no UNet step
    assert np.array_equal(np.asarray(resumed), straight)


def test_frames_own_keys_in_model_index_are_not_the_models_identity(tmp_path):
    """The demo's ``_frame_default_steps`` (added after 0.1) changed the model's identity, so a
    checkpoint written before it never resumed (tests/worker/test_formats.py passed only beside a
    copy of the demo left in /tmp by an older checkout). frame's own keys are settings, not the model;
    any other change to model_index.json still changes the identity."""
    import shutil

    from frame.diffusion.model_files import ModelFiles

    model = tmp_path / "demo"
    shutil.copytree(demo_model_path(), model)
    index = model / "model_index.json"
    text = index.read_text()
    with_key = ModelFiles(model).identity()
    assert '"_frame_default_steps"' in text
    index.write_text("".join(line for line in text.splitlines(keepends=True) if "_frame_default_steps" not in line))
    assert ModelFiles(model).identity() == with_key
    index.write_text(text.replace('"StableDiffusionPipeline"', '"StableDiffusionImg2ImgPipeline"'))
    assert ModelFiles(model).identity() != with_key
