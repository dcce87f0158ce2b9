"""The pipeline end to end on the bundled demo model (tiny SD 1.5 architecture) through frame's engine."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
from PIL import Image

from frame.diffusion import RenderPlan, load_pipeline, save_png
from frame.diffusion.pipeline import engine_loader
from frame.diffusion.samplers import NoiseSource
from frame.errors import FrameError, UsageError
from frame.models import demo_model_path
from tests.painting import paint

SIZE = dict(width=64, height=64)


@pytest.fixture(scope="module")
def pipe():
    return load_pipeline(demo_model_path())


class CountingLoader:
    """Wraps the engine loader and records which components ran and with what batch sizes
    (``unet_batches``: one entry per ``run``; ``unet_shared``: item count per ``run_shared``)."""

    def __init__(self) -> None:
        self.load = engine_loader()
        self.loaded: list[str] = []
        self.unet_batches: list[int] = []
        self.unet_shared: list[int] = []

    def __call__(self, source: str):
        model = self.load(source)
        self.loaded.append(source.split("/")[-2])
        if "unet" in source:
            run = model.run

            def counting_run(feeds, progress=None):
                self.unet_batches.append(feeds["sample"].shape[0])
                return run(feeds, progress)

            model.run = counting_run
            run_shared = model.run_shared

            def counting_shared(feeds, progress=None):
                self.unet_shared.append(len(feeds))
                return run_shared(feeds, progress)

            model.run_shared = counting_shared
        return model


def test_defaults_follow_the_model_kind(pipe):
    assert pipe.kind == "sd15" and not pipe.info.turbo
    settings = pipe.settings("a cat")  # the demo model: its own 8 steps (frame.models.DEMO_DEFAULT_STEPS)
    assert (settings.steps, settings.guidance, settings.sampler) == (8, 7.5, "euler_a")
    assert (settings.width, settings.height) == (512, 512)


def test_generate_is_deterministic_per_seed(pipe):
    a = paint(pipe, "a red fox", steps=2, seed=1, **SIZE)
    b = paint(pipe, "a red fox", steps=2, seed=1, **SIZE)
    c = paint(pipe, "a red fox", steps=2, seed=2, **SIZE)
    assert a.size == (64, 64) and a.mode == "RGB"
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))


def test_init_noise_is_the_seeds_noise(pipe):
    noise = NoiseSource(5).normal((1, 4, 8, 8))
    a = paint(pipe, "a boat", steps=2, sampler="euler", seed=5, **SIZE)
    b = paint(pipe, "a boat", steps=2, sampler="euler", seed=99, init_noise=noise, **SIZE)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(UsageError, match=r"needs \(1, 4, 8, 8\)"):
        paint(pipe, "a boat", steps=1, init_noise=np.zeros((1, 4, 16, 16)), **SIZE)


def test_components_load_one_at_a_time_in_order():
    loader = CountingLoader()
    pipe = load_pipeline(demo_model_path(), loader=loader)
    paint(pipe, "a cat", steps=2, guidance=7.0, **SIZE)
    assert loader.loaded == ["unet", "text_encoder", "unet", "vae_decoder"]  # first unet: signature only
    assert loader.unet_shared == [2, 2] and loader.unet_batches == []  # both passes share each weight fetch


def test_no_guidance_skips_the_unconditional_pass():
    loader = CountingLoader()
    pipe = load_pipeline(demo_model_path(), loader=loader)
    paint(pipe, "a cat", negative_prompt="ignored", steps=3, guidance=1.0, **SIZE)
    assert loader.unet_batches == [1, 1, 1]


def test_guidance_modes_agree():
    loaders = {mode: CountingLoader() for mode in ("batched", "sequential", "shared")}
    pipes = {mode: load_pipeline(demo_model_path(), loader=loader, plan=RenderPlan(guidance_mode=mode))
             for mode, loader in loaders.items()}
    images = {mode: np.asarray(paint(pipe, "a hill", steps=2, sampler="ddim", **SIZE), dtype=np.float64)
              for mode, pipe in pipes.items()}
    assert np.abs(images["batched"] - images["sequential"]).max() <= 1
    assert np.array_equal(images["shared"], images["sequential"])  # the same kernels on the same inputs
    assert loaders["batched"].unet_batches == [2, 2]
    assert loaders["sequential"].unet_batches == [1, 1, 1, 1]
    assert loaders["shared"].unet_shared == [2, 2]


def test_a_tight_memory_limit_runs_the_passes_one_after_the_other(caplog):
    loader = CountingLoader()
    caplog.set_level(logging.INFO, logger="frame.diffusion.denoise_run")
    pipe = load_pipeline(demo_model_path(), loader=loader, plan=RenderPlan(memory_limit_mb=100))
    paint(pipe, "a hill", steps=1, **SIZE)
    assert loader.unet_batches == [1, 1] and loader.unet_shared == []
    assert "guidance passes: sequential (reading the weights once per step would need about" in caplog.text


def test_unknown_guidance_mode_is_refused():
    with pytest.raises(UsageError, match="unknown guidance mode 'double'"):
        load_pipeline(demo_model_path(), plan=RenderPlan(guidance_mode="double"))


def test_progress_reports_phases_steps_and_previews(pipe):
    events = []
    paint(pipe, "a cat", steps=3, callback=events.append, **SIZE)
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


def test_progress_counts_one_unets_weights_per_guided_step():
    events = []
    loader = CountingLoader()
    pipe = load_pipeline(demo_model_path(), loader=loader)
    paint(pipe, "a cat", steps=3, guidance=7.5, callback=events.append, **SIZE)
    unet = loader.load(pipe.unet_source)
    weights = sum(ref.nbytes for ref in unet.streamed_weights)
    unet.close()
    per_step = [e.bytes_per_step for e in events if e.step_done]
    # both guidance passes, one read of each weight (plus the few bytes of protobuf framing between the
    # demo's embedded weights, read along with them); twice the weights if the passes each read them
    assert len(set(per_step)) == 1 and weights <= per_step[0] < 1.01 * weights
    assert all(e.link_rate is None for e in events if e.step_done)  # from disk: no link


def test_png_carries_a1111_parameters(pipe, tmp_path):
    image = paint(pipe, "a (red:1.2) barn", negative_prompt="fog", steps=2, seed=3, sampler="dpm++2m", **SIZE)
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
        paint(pipe, long_prompt, steps=1, guidance=0, **SIZE)
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
        paint(pipe, "a cat", **{**SIZE, **kwargs})


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
    plain = np.asarray(paint(pipe, "a red barn", **args))
    neutral = np.asarray(paint(pipe, "a (red:1.0) barn", **args))
    stressed = np.asarray(paint(pipe, "a (red:1.8) barn", **args))
    assert np.array_equal(plain, neutral)
    assert not np.array_equal(plain, stressed)


def test_turbo_models_default_to_one_unguided_step(tmp_path, caplog):
    turbo = tmp_path / "sd-turbo-onnx"
    shutil.copytree(demo_model_path(), turbo)
    index = json.loads((turbo / "model_index.json").read_text())
    del index["_frame_default_steps"]  # a real Turbo export has no own default: its kind's 1 step
    (turbo / "model_index.json").write_text(json.dumps(index))
    loader = CountingLoader()
    pipe = load_pipeline(turbo, loader=loader)
    settings = pipe.settings("a cat")
    assert pipe.info.turbo and (settings.steps, settings.guidance, settings.guided) == (1, 0.0, False)
    paint(pipe, "a cat", width=32, height=32)
    assert loader.unet_batches == [1]
    with caplog.at_level(logging.WARNING, logger="frame.diffusion"):
        pipe.settings("a cat", steps=8)
    assert any("distilled for 1-4 steps" in r.getMessage() for r in caplog.records)


def test_embed_text_reads_the_encoder_once_per_pass_of_texts(pipe, monkeypatch):
    """The taste picker embeds a night's 80+ candidates: in shared passes (four padded texts'
    positions each), the encoder's weights are read once per pass (was: once per text), with the same
    vectors."""
    from frame.diffusion import conditioning

    texts = [f"a painting number {n}" for n in range(20)]
    monkeypatch.setattr(conditioning, "texts_per_pass", lambda positions=None: 1)
    one_by_one = pipe.embed_text(texts)
    monkeypatch.setattr(conditioning, "texts_per_pass", lambda positions=None: 8)
    calls = []
    original = pipe.load

    def counting_load(source):
        model = original(source)
        run_shared = model.run_shared
        model.run_shared = lambda feeds, *a, **k: calls.append(len(feeds)) or run_shared(feeds, *a, **k)
        return model

    monkeypatch.setattr(pipe, "load", counting_load)
    together = pipe.embed_text(texts)
    assert calls == [7, 7, 6]  # three shared passes, not 20 runs
    np.testing.assert_allclose(together, one_by_one, rtol=1e-5, atol=1e-6)
    assert conditioning.text_passes(list("abcdefghijklmnopq"), 8) == [list("abcdef"), list("ghijkl"), list("mnopq")]
    monkeypatch.undo()
    calls.clear()
    monkeypatch.setattr(pipe, "load", counting_load)
    pipe.embed_text(texts)  # 6 positions each through end-of-text: four padded texts' positions hold all 20
    assert calls == [20]
    assert [conditioning.texts_per_pass(n) for n in (None, 77, 20, 12, 2)] == [4, 4, 15, 25, 154]
