"""Image-to-image end to end on the bundled demo model: generate, PNG fields, CLI, bad input, resume."""

from __future__ import annotations

import dataclasses
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

from frame.diffusion import img2img, load_pipeline
from frame.diffusion.model_check import describe_folder
from frame.diffusion.resume import FILENAME
from frame.errors import UsageError
from frame.models import demo_model_path
from tests.diffusion.test_commands import parse
from tests.diffusion.test_resume import _wait_for_checkpoint
from tests.painting import paint

ROOT = Path(__file__).resolve().parents[2]
SIZE = dict(width=64, height=64)


@pytest.fixture(scope="module")
def pipe():
    return load_pipeline(demo_model_path())


@pytest.fixture(scope="module")
def picture(pipe):
    """A frame picture to make "more like this" of (the demo's own render)."""
    return paint(pipe, "a lighthouse", steps=2, seed=3, **SIZE)


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch):
    monkeypatch.delenv("FRAME_CONFIG", raising=False)


class Crash(Exception):
    pass


def test_generate_runs_the_last_steps_and_records_the_strength(pipe, picture):
    seen = []
    image = paint(pipe, "a lighthouse", steps=6, seed=5, init_image=picture, strength=0.5,
                          callback=seen.append, **SIZE)
    assert image.size == (64, 64)
    assert [p.step for p in seen if p.step_done] == [1, 2, 3]  # 6 x 0.5: three steps, counted from 1
    assert {p.steps for p in seen if p.phase == "unet"} == {3}
    assert seen[0].phase == "encode" and [p.phase for p in seen].index("text") > 0  # encoder first
    text = image.info["parameters"]
    digest = img2img.prepare(picture, 64, 64).digest
    assert f"Steps: 6, Sampler: Euler a, CFG scale: 7.5, Seed: 5, Size: 64x64, Model: demo, " \
           f"Denoising strength: 0.5, Init image hash: {digest}, Version: frame" in text
    again = paint(pipe, "a lighthouse", steps=6, seed=5, init_image=picture, strength=0.5, **SIZE)
    assert np.array_equal(np.asarray(image), np.asarray(again))


def test_strength_seed_and_picture_each_change_the_result(pipe, picture):
    args = dict(steps=2, seed=1, **SIZE)
    base = np.asarray(paint(pipe, "a lighthouse", init_image=picture, strength=0.5, **args))
    for change in (dict(strength=1.0), dict(seed=2), dict(init_image=picture.transpose(0))):
        call = {"init_image": picture, "strength": 0.5, **args, **change}
        assert not np.array_equal(base, np.asarray(paint(pipe, "a lighthouse", **call))), change


def test_init_image_of_another_size_is_fitted(pipe, picture):
    wide = picture.resize((300, 120))
    image = paint(pipe, "x", steps=2, init_image=wide, strength=1.0, width=64, height=128)
    assert image.size == (64, 128)


def test_turbo_default_steps_run_at_least_one_step(pipe):
    turbo = load_pipeline(demo_model_path())
    turbo.info = dataclasses.replace(pipe.info, turbo=True, steps_override=None)  # not the demo's own 8
    assert turbo.settings("x", strength=0.5, **SIZE).steps == 2  # Turbo's 1 step x 0.5 would run none
    assert turbo.settings("x", **SIZE).steps == 1
    regular = load_pipeline(demo_model_path())
    regular.info = dataclasses.replace(pipe.info, steps_override=None)
    assert regular.settings("x", strength=0.3, **SIZE).steps == 20


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(strength=0.0), "strength must be a number greater than 0 and at most 1"),
    (dict(strength=1.5), "strength must be a number greater than 0 and at most 1"),
    (dict(strength=0.2, steps=4), r"strength 0.2 with 4 steps runs no denoising step .* at least 5 steps"),
])
def test_bad_strength_is_named_before_any_model_runs(pipe, picture, kwargs, message):
    with pytest.raises(UsageError, match=message):
        paint(pipe, "x", init_image=picture, **SIZE, **kwargs)


def test_strength_without_a_picture_and_picture_of_the_wrong_size(pipe, picture):
    settings = pipe.settings("x", strength=0.5, **SIZE)
    with pytest.raises(UsageError, match="give an init image too"):
        pipe.denoise_settings(settings)
    with pytest.raises(UsageError, match="init image is 32x32 but the render is 64x64"):
        pipe.denoise_settings(settings, init_image=img2img.prepare(picture, 32, 32))
    with pytest.raises(UsageError, match="init image must be a picture or a file path"):
        img2img.prepare(np.zeros((64, 64, 3)), 64, 64)


def test_model_without_vae_encoder_says_so(tmp_path, picture):
    folder = tmp_path / "no-encoder"
    folder.mkdir()
    for item in demo_model_path().iterdir():
        if item.name != "vae_encoder":
            (folder / item.name).symlink_to(item)
    pipe = load_pipeline(folder)
    paint(pipe, "x", steps=1, **SIZE)  # text-to-image does not need it
    with pytest.raises(UsageError, match="has no vae_encoder/model.onnx, which image-to-image needs"):
        paint(pipe, "x", steps=2, init_image=picture, strength=0.5, **SIZE)
    lines = [line for _, line in describe_folder(folder)]  # what `frame config check` prints
    assert "image-to-image (more like this): not available, the folder has no vae_encoder/model.onnx" in lines[-1]
    lines = [line for _, line in describe_folder(demo_model_path())]
    assert lines[-1] == "image-to-image (more like this): available" and "vae_encoder fp32" in lines[0]


def _crash_after(step: int):
    def callback(progress):
        if progress.step_done and progress.step == step:
            raise Crash()
    return callback


@pytest.mark.parametrize("sampler", ["dpm++2m", "euler_a"])
def test_resume_after_a_crash_is_bit_identical_and_skips_the_encoder(tmp_path, pipe, picture, sampler):
    args = dict(steps=8, sampler=sampler, seed=11, init_image=picture, strength=0.75, **SIZE)
    straight = np.asarray(paint(pipe, "a lighthouse", **args))
    with pytest.raises(Crash):
        paint(pipe, "a lighthouse", callback=_crash_after(2), resume_dir=tmp_path, **args)
    seen = []
    resumed = paint(pipe, "a lighthouse", resume_dir=tmp_path, callback=seen.append, **args)
    assert [e.step for e in seen if e.step_done] == [3, 4, 5, 6]  # 6 steps run; continued after the 2nd
    assert "encode" not in {e.phase for e in seen}
    assert np.array_equal(np.asarray(resumed), straight)
    assert not (tmp_path / FILENAME).exists()


def test_resume_state_of_another_picture_or_strength_is_not_used(tmp_path, pipe, picture):
    args = dict(steps=4, seed=2, **SIZE)
    with pytest.raises(Crash):
        paint(pipe, "x", init_image=picture, strength=1.0, callback=_crash_after(1), resume_dir=tmp_path, **args)
    for other in (dict(init_image=picture.transpose(0), strength=1.0), dict(init_image=picture, strength=0.75),
                  dict()):
        seen = []
        with pytest.raises(Crash):
            paint(pipe, "x", callback=lambda p, seen=seen: (seen.append(p), _crash_after(1)(p)),
                          resume_dir=tmp_path, **args, **other)
        assert [e.step for e in seen if e.step_done] == [1], other  # started over


def _render(out: Path, init: Path, resume: Path | None) -> subprocess.Popen:
    command = [sys.executable, "-m", "frame", "render", "--model", str(demo_model_path()), "--prompt",
               "a storm at sea", "--steps", "16", "--seed", "4", "--sampler", "euler_a", "--size", "64x64",
               "--init-image", str(init), "--strength", "0.75", "--out", str(out)]
    if resume is not None:
        command += ["--resume", str(resume)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FRAME_CONFIG", None)
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_at_random_moments_then_resume_gives_the_identical_png(tmp_path, picture):
    init = tmp_path / "picture.png"
    picture.save(init)
    reference = _render(tmp_path / "reference.png", init, None)
    assert reference.wait(timeout=120) == 0, reference.communicate()
    state_dir, state = tmp_path / "state", tmp_path / "state" / FILENAME
    rng = random.Random(2)
    mtime = 0
    for _ in range(1):  # one power cut (tests/diffusion/test_resume.py makes two in text-to-image)
        victim = _render(tmp_path / "out.png", init, state_dir)
        mtime = _wait_for_checkpoint(state, victim, mtime)
        time.sleep(rng.uniform(0.0, 0.05))  # a random moment inside the remaining steps
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        assert victim.returncode == -signal.SIGKILL
    final = _render(tmp_path / "out.png", init, state_dir)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert "resuming from step" in err
    a, b = Image.open(tmp_path / "reference.png"), Image.open(tmp_path / "out.png")
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert a.info["parameters"] == b.info["parameters"] and "Denoising strength: 0.75" in b.info["parameters"]
    assert not state.exists()


def test_cli_render_from_a_photo(tmp_path, picture, capsys):
    photo = tmp_path / "photo.jpg"
    picture.resize((120, 90)).save(photo, quality=95)
    out = tmp_path / "more.png"
    args = parse(["render", "--model", str(demo_model_path()), "--prompt", "a cat", "--steps", "4",
                  "--size", "64x64", "--init-image", str(photo), "--out", str(out)])
    assert args.func(args) == 0
    assert "Steps: 4, " in Image.open(out).info["parameters"]
    assert "Denoising strength: 0.6, " in Image.open(out).info["parameters"]  # the default strength
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--strength", "0.5"], "--strength is for image-to-image: give --init-image FILE too"),
    (["--init-image", "/nonexistent.png"], "--init-image /nonexistent.png: no such file"),
    (["--init-image", __file__], "not a picture Pillow can read"),
    (["--init-image", "PICTURE", "--strength", "0"], "strength must be a number greater than 0"),
])
def test_cli_bad_init_image_or_strength(tmp_path, picture, argv, message):
    picture.save(tmp_path / "p.png")
    argv = [str(tmp_path / "p.png") if a == "PICTURE" else a for a in argv]
    args = parse(["render", "--model", str(demo_model_path()), "--prompt", "x", "--steps", "2", "--size", "64x64",
                  "--out", str(tmp_path / "x.png"), *argv])
    with pytest.raises(UsageError, match=message):
        args.func(args)
    assert not (tmp_path / "x.png").exists()
