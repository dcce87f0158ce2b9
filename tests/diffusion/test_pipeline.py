"""The pipeline end to end on the bundled demo model (tiny SD 1.5 architecture) through frame's engine."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
from PIL import Image

from frame.diffusion import load_pipeline, save_png
from frame.diffusion.pipeline import engine_loader
from frame.diffusion.samplers import NoiseSource
from frame.errors import FrameError, UsageError
from frame.models import demo_model_path

SIZE = dict(width=64, height=64)


@pytest.fixture(scope="module")
def pipe():
    return load_pipeline(demo_model_path())


class CountingLoader:
    """Wraps the engine loader and records which components ran and with what batch sizes."""

    def __init__(self) -> None:
        self.load = engine_loader()
        self.loaded: list[str] = []
        self.unet_batches: list[int] = []

    def __call__(self, source: str):
        model = self.load(source)
        self.loaded.append(source.split("/")[-2])
        if "unet" in source:
            run = model.run

            def counting_run(feeds, progress=None):
                self.unet_batches.append(feeds["sample"].shape[0])
                return run(feeds, progress)

            model.run = counting_run
        return model


def test_defaults_follow_the_model_kind(pipe):
    assert pipe.kind == "sd15" and not pipe.info.turbo
    settings = pipe.settings("a cat")  # the demo model: its own 8 steps (frame.models.DEMO_DEFAULT_STEPS)
    assert (settings.steps, settings.guidance, settings.sampler) == (8, 7.5, "euler_a")
    assert (settings.width, settings.height) == (512, 512)


def test_generate_is_deterministic_per_seed(pipe):
    a = pipe.generate("a red fox", steps=2, seed=1, **SIZE)
    b = pipe.generate("a red fox", steps=2, seed=1, **SIZE)
    c = pipe.generate("a red fox", steps=2, seed=2, **SIZE)
    assert a.size == (64, 64) and a.mode == "RGB"
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))


def test_init_noise_is_the_seeds_noise(pipe):
    noise = NoiseSource(5).normal((1, 4, 8, 8))
    a = pipe.generate("a boat", steps=2, sampler="euler", seed=5, **SIZE)
    b = pipe.generate("a boat", steps=2, sampler="euler", seed=99, init_noise=noise, **SIZE)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(UsageError, match=r"needs \(1, 4, 8, 8\)"):
        pipe.generate("a boat", steps=1, init_noise=np.zeros((1, 4, 16, 16)), **SIZE)


def test_components_load_one_at_a_time_in_order():
    loader = CountingLoader()
    pipe = load_pipeline(demo_model_path(), loader=loader)
    pipe.generate("a cat", steps=2, guidance=7.0, **SIZE)
    assert loader.loaded == ["unet", "text_encoder", "unet", "vae_decoder"]  # first unet: signature only
    assert loader.unet_batches == [1, 1, 1, 1]  # two guidance passes per step, one at a time by default


def test_no_guidance_skips_the_unconditional_pass():
    loader = CountingLoader()
    pipe = load_pipeline(demo_model_path(), loader=loader)
    pipe.generate("a cat", negative_prompt="ignored", steps=3, guidance=1.0, **SIZE)
    assert loader.unet_batches == [1, 1, 1]


def test_batched_and_sequential_guidance_agree():
    loader = CountingLoader()
    batched = load_pipeline(demo_model_path(), loader=loader, cfg_batch=True)
    sequential = load_pipeline(demo_model_path())
    a = np.asarray(batched.generate("a hill", steps=2, sampler="ddim", **SIZE), dtype=np.float64)
    b = np.asarray(sequential.generate("a hill", steps=2, sampler="ddim", **SIZE), dtype=np.float64)
    assert np.abs(a - b).max() <= 1
    assert loader.unet_batches == [2, 2]


def test_progress_reports_phases_steps_and_previews(pipe):
    events = []
    pipe.generate("a cat", steps=3, callback=events.append, **SIZE)
    phases = [e.phase for e in events]
    assert phases[0] == "text" and phases[-1] == "vae"
    steps = [e for e in events if e.step_done]
    assert [e.step for e in steps] == [1, 2, 3]
    assert steps[-1].fraction == 1.0 and steps[-1].eta_seconds == 0.0
    ops = [e for e in events if e.phase == "unet" and not e.step_done]
    assert len(ops) > 100  # one report per UNet op
    fractions = [e.fraction for e in events if e.phase == "unet"]
    assert fractions == sorted(fractions)
    preview = steps[0].preview(scale=2)
    assert isinstance(preview, Image.Image) and preview.size == (16, 16)


def test_png_carries_a1111_parameters(pipe, tmp_path):
    image = pipe.generate("a (red:1.2) barn", negative_prompt="fog", steps=2, seed=3, sampler="dpm++2m", **SIZE)
    path = tmp_path / "out.png"
    save_png(image, path)
    text = Image.open(path).info["parameters"]
    assert text.splitlines() == [
        "a (red:1.2) barn",
        "Negative prompt: fog",
        "Steps: 2, Sampler: DPM++ 2M, CFG scale: 7.5, Seed: 3, Size: 64x64, Model: demo, "
        f"Version: frame {__import__('frame').__version__}",
    ]


def test_embed_text_gives_pooled_embeddings(pipe):
    vectors = pipe.embed_text(["a cat", "a dog", "a cat"])
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    assert np.array_equal(vectors[0], vectors[2])
    assert not np.allclose(vectors[0], vectors[1])


def test_long_prompt_warns_and_truncates(pipe, caplog):
    long_prompt = ", ".join(["a very detailed painting of a quiet harbour"] * 12)
    with caplog.at_level(logging.WARNING, logger="frame.diffusion"):
        pipe.generate(long_prompt, steps=1, guidance=0, **SIZE)
    assert any("longer than 75 tokens" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(sampler="eular_a"), "did you mean 'euler_a'"),
        (dict(width=100, height=64), "multiples of 16 pixels"),
        (dict(steps=0), "steps must be a positive integer"),
        (dict(guidance=-1), "guidance must be"),
        (dict(seed=-3), "seed must be"),
    ],
)
def test_bad_settings_are_named(pipe, kwargs, message):
    with pytest.raises(UsageError, match=message):
        pipe.generate("a cat", **{**SIZE, **kwargs})


def test_missing_model_files_are_named(tmp_path):
    with pytest.raises(FrameError, match="model folder not found"):
        load_pipeline(tmp_path / "nowhere")
    with pytest.raises(FrameError, match="model_index.json is missing"):
        load_pipeline(tmp_path)
    copy = tmp_path / "demo"
    shutil.copytree(demo_model_path(), copy)
    (copy / "unet" / "model.onnx").unlink()
    with pytest.raises(FrameError, match=r"missing model file: .*unet/model.onnx"):
        load_pipeline(copy)
    shutil.rmtree(copy / "tokenizer")
    with pytest.raises(FrameError, match=r"missing model file: .*tokenizer/vocab.json"):
        load_pipeline(copy)


def test_emphasis_changes_the_picture_only_when_weighted(pipe):
    args = dict(steps=1, guidance=0, seed=2, width=32, height=32)
    plain = np.asarray(pipe.generate("a red barn", **args))
    neutral = np.asarray(pipe.generate("a (red:1.0) barn", **args))
    stressed = np.asarray(pipe.generate("a (red:1.8) barn", **args))
    assert np.array_equal(plain, neutral)
    assert not np.array_equal(plain, stressed)


def test_turbo_models_default_to_one_unguided_step(tmp_path, caplog):
    turbo = tmp_path / "sd-turbo-onnx"
    shutil.copytree(demo_model_path(), turbo)
    loader = CountingLoader()
    pipe = load_pipeline(turbo, loader=loader)
    settings = pipe.settings("a cat")
    assert pipe.info.turbo and (settings.steps, settings.guidance, settings.guided) == (1, 0.0, False)
    pipe.generate("a cat", width=32, height=32)
    assert loader.unet_batches == [1]
    with caplog.at_level(logging.WARNING, logger="frame.diffusion"):
        pipe.settings("a cat", steps=8)
    assert any("distilled for 1-4 steps" in r.getMessage() for r in caplog.records)
