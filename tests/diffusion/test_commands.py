"""``frame render`` through its argparse registration (as frame/cli/program/main.py wires it)."""

from __future__ import annotations

import argparse
import io

import numpy as np
import pytest
from PIL import Image

from frame.cli import render as commands
from frame.diffusion.progress import Progress
from frame.errors import Interrupted, UsageError
from frame.models import demo_model_path


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="frame")
    parser.add_argument("--config")
    parser.add_argument("--debug", action="store_true")
    commands.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch):
    monkeypatch.delenv("FRAME_CONFIG", raising=False)


def test_render_save_and_decode_latents(tmp_path, capsys):
    out, latents = tmp_path / "a.png", tmp_path / "a.npy"
    args = parse(["render", "--model", str(demo_model_path()), "--prompt", "a cat", "--steps", "2",
                  "--size", "64x64", "--seed", "7", "--sampler", "ddim", "--guidance", "3",
                  "--out", str(out), "--save-latents", str(latents)])
    assert args.func(args) == 0
    image = Image.open(out)
    assert image.size == (64, 64)
    assert "Steps: 2, Sampler: DDIM, CFG scale: 3, Seed: 7, Size: 64x64" in image.info["parameters"]
    assert np.load(latents).shape == (1, 4, 8, 8)
    assert "wrote" in capsys.readouterr().out

    again = tmp_path / "b.png"
    args = parse(["render", "--model", str(demo_model_path()), "--decode-latents", str(latents), "--out", str(again)])
    assert args.func(args) == 0
    assert np.array_equal(np.asarray(Image.open(again)), np.asarray(image))


def test_model_defaults_to_the_configured_demo(tmp_path):
    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32))
    args = parse(["render", "--prompt", "x", "--steps", "1", "--guidance", "0", "--size", "32x32",
                  "--init-noise", str(noise), "--out", str(tmp_path / "c.png")])
    assert args.func(args) == 0
    assert "Model: demo" in Image.open(tmp_path / "c.png").info["parameters"]


def test_model_demo_names_the_bundled_model(tmp_path, monkeypatch):
    """``--model demo`` is documented in --help; it once failed with 'model folder not found: demo'."""
    monkeypatch.chdir(tmp_path)  # no folder called demo here
    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32))
    args = parse(["render", "--model", "demo", "--prompt", "x", "--steps", "1", "--guidance", "0",
                  "--size", "32x32", "--init-noise", str(noise), "--out", str(tmp_path / "d.png")])
    assert args.func(args) == 0
    assert "Model: demo" in Image.open(tmp_path / "d.png").info["parameters"]


def test_render_without_steps_uses_the_models_default(tmp_path):
    """config.yaml says ``steps: null`` is 8 for the demo; ``frame render`` once ran 20 (issue 13)."""
    from frame.models import DEMO_DEFAULT_STEPS

    args = parse(["render", "--prompt", "x", "--size", "32x32", "--out", str(tmp_path / "s.png")])
    assert args.func(args) == 0
    assert f"Steps: {DEMO_DEFAULT_STEPS}," in Image.open(tmp_path / "s.png").info["parameters"]


def _seed_of(path) -> int:
    text = Image.open(path).info["parameters"]
    return int(text.split("Seed: ")[1].split(",")[0])


@pytest.mark.parametrize("seed_args", [[], ["--seed", "-1"]])
def test_default_and_minus_one_seeds_are_random_printed_and_stored(tmp_path, capsys, seed_args):
    """The seed once defaulted to 0 (a prompt always gave the same picture) and -1 was refused."""
    seeds = []
    for name in ("a.png", "b.png"):
        args = parse(["render", "--prompt", "x", "--steps", "1", "--size", "32x32", *seed_args,
                      "--out", str(tmp_path / name)])
        assert args.func(args) == 0
        captured = capsys.readouterr()
        seed = _seed_of(tmp_path / name)
        assert f"seed {seed} (random)" in captured.err and f"seed {seed})" in captured.out
        seeds.append(seed)
    assert seeds[0] != seeds[1]
    assert not np.array_equal(np.asarray(Image.open(tmp_path / "a.png")), np.asarray(Image.open(tmp_path / "b.png")))


def test_a_printed_seed_makes_the_same_picture_again(tmp_path, capsys):
    args = parse(["render", "--prompt", "x", "--steps", "1", "--size", "32x32", "--out", str(tmp_path / "a.png")])
    assert args.func(args) == 0
    seed = _seed_of(tmp_path / "a.png")
    capsys.readouterr()
    args = parse(["render", "--prompt", "x", "--steps", "1", "--size", "32x32", "--seed", str(seed),
                  "--out", str(tmp_path / "b.png")])
    assert args.func(args) == 0
    assert "(random)" not in capsys.readouterr().err
    assert np.array_equal(np.asarray(Image.open(tmp_path / "a.png")), np.asarray(Image.open(tmp_path / "b.png")))


def test_a_random_seed_survives_an_interrupted_resumable_render(tmp_path, monkeypatch):
    """--resume with a random seed: the continued render must use the seed it started with."""
    from frame.diffusion import pipeline

    resume, calls = tmp_path / "resume", []
    real = pipeline.Pipeline.denoise_settings

    def interrupted_once(self, settings, *rest, **options):
        calls.append(settings.seed)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(self, settings, *rest, **options)

    monkeypatch.setattr(pipeline.Pipeline, "denoise_settings", interrupted_once)
    argv = ["render", "--prompt", "x", "--steps", "1", "--size", "32x32", "--resume", str(resume),
            "--out", str(tmp_path / "a.png")]
    with pytest.raises(Interrupted):
        parse(argv).func(parse(argv))
    assert parse(argv).func(parse(argv)) == 0
    assert calls[0] == calls[1] == _seed_of(tmp_path / "a.png")
    assert list(resume.iterdir()) == []  # checkpoint and remembered seed are gone once the picture is written


@pytest.mark.parametrize("resume", [True, False])
def test_ctrl_c_says_how_to_continue(tmp_path, monkeypatch, capsys, resume):
    """Ctrl-C once said only "interrupted": it now says that running the command again with --resume
    continues (and it really does, from the last finished step), or how to make a render resumable."""
    from frame.cli.program import main
    from frame.diffusion import denoise

    real, steps = denoise.run_loop, []

    def stop_after_two(sampler, unet, latents, state, start, on_step, on_op=None):
        def counting(done, current, denoised):
            on_step(done, current, denoised)
            steps.append(done)
            if done == 2 and len(steps) == 2:
                raise KeyboardInterrupt
        return real(sampler, unet, latents, state, start, counting, on_op)

    monkeypatch.setattr(denoise, "run_loop", stop_after_two)
    argv = ["render", "--prompt", "x", "--steps", "4", "--size", "32x32", "--out", str(tmp_path / "a.png")]
    argv += ["--resume", str(tmp_path / "r")] if resume else []
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    if resume:
        assert err == (f"frame: interrupted: stopped after step 2/4; run the same frame render command again "
                       f"(with --resume {tmp_path / 'r'}) to continue from the last finished step")
        assert main(argv) == 0 and steps == [1, 2, 3, 4]  # went on from step 2
    else:
        assert err.startswith("frame: interrupted: stopped after step 2/4; nothing was kept. Add --resume DIR")
    assert not resume or (tmp_path / "a.png").exists()


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (["--prompt", "x", "--sampler", "heun"], UsageError, "unknown sampler 'heun'"),
        (["--prompt", "x", "--size", "50x50"], UsageError, "multiples of 16"),
        (["--steps", "2"], UsageError, "--prompt is required"),
        (["--prompt", "x", "--steps", "0"], UsageError, "steps must be a positive integer"),
        (["--prompt", "x", "--seed", "-2"], UsageError, "seed must be -1 \\(random\\) or an integer from 0"),
        (["--prompt", "x", "--init-noise", "/nonexistent.npy"], UsageError, "--init-noise /nonexistent.npy: no such "
                                                                            "file"),
        (["--prompt", "x", "--model", "/nonexistent/model"], UsageError, "--model /nonexistent/model: no such model "
                                                                         "folder"),
    ],
)
def test_bad_input(tmp_path, argv, error, message):
    args = parse(["render", "--out", str(tmp_path / "x.png"), *argv])
    with pytest.raises(error, match=message):
        args.func(args)


def test_progress_bar_lines():
    stream = io.StringIO()
    bar = commands.ProgressBar(stream)
    bar(Progress("text", 0, 4, 0.0, 0.0, None))
    bar(Progress("unet", 0, 4, 0.5, 0.125, 30.0))  # op report: not drawn off a terminal
    bar(Progress("unet", 2, 4, 0.0, 0.5, 3725.0, step_done=True))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("encoding prompt")
    assert lines[1].startswith("step 2/4 [###############...............]  50% ETA 1:02:05")
    assert len(lines) == 2


def test_progress_bar_shows_bytes_per_step_and_the_link_rate():
    stream = io.StringIO()
    bar = commands.ProgressBar(stream)
    bar(Progress("unet", 1, 4, 0.0, 0.25, 60.0, step_done=True, bytes_per_step=3_437_361_936, link_rate=4.1e6))
    bar(Progress("unet", 2, 4, 0.0, 0.5, 40.0, step_done=True, bytes_per_step=860_000_000))
    first, second = stream.getvalue().splitlines()
    assert first.rstrip().endswith("ETA 1:00 · 3.44 GB/step, link 4.1 MB/s")
    assert second.rstrip().endswith("ETA 0:40 · 860 MB/step")  # from disk: no link rate


def test_size_auto_follows_the_panel_aspect():
    from frame.diffusion import load_pipeline

    pipe = load_pipeline(demo_model_path())
    width, height = commands._size(pipe, "auto", "800x480")
    assert width / height == pytest.approx(800 / 480, rel=0.05)
    assert 0.8 < width * height / 512**2 < 1.25
    assert commands._size(pipe, "256x128", "800x480") == (256, 128)


def test_noise_option_and_model_noise_choose_the_source_and_say_so(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  noise: a1111-nv\n")
    common = ["render", "--model", str(demo_model_path()), "--prompt", "a cat", "--steps", "2", "--size", "32x32",
              "--seed", "5", "--sampler", "euler_a"]
    pictures = {}
    for name, extra in (("configured", ["--config", str(config)]), ("torch", ["--noise", "torch-cpu"]),
                        ("frame", [])):
        head = extra if extra[:1] == ["--config"] else []
        args = parse(head + common + (extra if not head else []) + ["--out", str(tmp_path / f"{name}.png")])
        assert args.func(args) == 0
        pictures[name] = Image.open(tmp_path / f"{name}.png")
    assert "RNG: NV" in pictures["configured"].info["parameters"]
    assert "RNG: CPU" in pictures["torch"].info["parameters"]
    assert "RNG" not in pictures["frame"].info["parameters"]
    arrays = [np.asarray(p) for p in pictures.values()]
    assert not np.array_equal(arrays[0], arrays[1]) and not np.array_equal(arrays[1], arrays[2])
