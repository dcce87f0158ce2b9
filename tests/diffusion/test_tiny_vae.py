"""``model.vae_decoder``: the pipeline decodes (and encodes for image-to-image) with a tiny VAE folder
written by ``frame model import --tiny-vae``, with the latent scaling diffusers uses for an AutoencoderTiny
(``latents / tiny.scaling_factor``, 1.0, not the model's 0.18215)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from frame.config import checks
from frame.config.loader import validate
from frame.convert.importer.vae import import_tiny_vae
from frame.diffusion.configured import pipeline_setup
from frame.engine import load_model
from frame.errors import UsageError
from tests.convert.test_tiny_vae_import import _fixture_folder
from tests.daemon.conftest import make_config


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("tiny")
    folder, _ = _fixture_folder(base)
    import_tiny_vae(str(folder), base / "models" / "taesd", weights="fp32")
    return base


def _setup(state: Path, value: str):
    config = make_config(state, model={"source": "demo", "vae_decoder": value}, worker={"memory_limit_mb": 300})
    return pipeline_setup(config)


def _decoder(path: str, latents: np.ndarray) -> np.ndarray:
    with load_model(path) as model:
        return model.run({"latent_sample": latents})["sample"]


def test_decode_uses_the_tiny_vae_on_unscaled_latents(tiny: Path):
    pipe = _setup(tiny, "taesd").load()  # the name: STATE_DIR/models/taesd
    assert pipe.vae_source == str(tiny / "models/taesd/vae_decoder/model.onnx") and pipe.decode_scaling == 1.0
    latents = np.random.default_rng(1).standard_normal((1, 4, 4, 4)).astype(np.float32)
    got = np.asarray(pipe.decode(latents, tiled=False), np.float32)
    want = np.clip((_decoder(pipe.vae_source, latents)[0].transpose(1, 2, 0) + 1) * 127.5, 0, 255)
    assert np.abs(got - np.round(want)).max() <= 1
    scaled = np.clip((_decoder(pipe.vae_source, latents / np.float32(0.18215))[0].transpose(1, 2, 0) + 1) * 127.5,
                     0, 255)
    assert np.abs(got - np.round(scaled)).max() > 8, "the model's own factor would decode another picture"
    full = _setup(tiny, "").load()
    assert full.tiny_vae is None and full.decode_scaling == pytest.approx(0.18215)


def test_render_and_img2img_through_the_tiny_vae(tiny: Path):
    pipe = _setup(tiny, str(tiny / "models/taesd")).load()  # a folder
    assert pipe.vae_encoder_source() == str(tiny / "models/taesd/vae_encoder/model.onnx")
    image = pipe.generate(pipe.settings("a lighthouse", steps=2, guidance=0, seed=3, width=32, height=32))
    assert image.size == (32, 32)
    again = pipe.generate(pipe.settings("a lighthouse", steps=2, guidance=0, seed=3, width=32, height=32,
                                        strength=0.5), init_image=Image.new("RGB", (32, 32), (200, 40, 40)))
    assert again.size == (32, 32)


def test_refusals_name_the_setting(tiny: Path, tmp_path: Path):
    with pytest.raises(UsageError, match="model.vae_decoder: .*frame model import --tiny-vae taesd"):
        _setup(tmp_path, "taesd").load()  # nothing imported in this state dir
    with pytest.raises(UsageError, match="taesdxl decodes SDXL latents.*use taesd"):
        _setup(tiny, "taesdxl").load()
    not_tiny = tmp_path / "kl"
    (not_tiny / "vae_decoder").mkdir(parents=True)
    (not_tiny / "vae_decoder/config.json").write_text('{"_class_name": "AutoencoderKL"}')
    (not_tiny / "vae_decoder/model.onnx").write_bytes(b"")
    with pytest.raises(UsageError, match="not an AutoencoderTiny config"):
        _setup(tiny, str(not_tiny)).load()


def test_the_setting_is_validated(tmp_path: Path):
    values = ("", "taesd", "taesdxl", "/srv/taesd", "https://nas.local/taesd/")
    assert [checks.tiny_vae(v) for v in values] == [None] * len(values)
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  vae_decoder: ftp://nas/taesd\n")
    _, problems, _ = validate(str(path), {})
    assert any(line.startswith("model.vae_decoder:") for line in problems.lines), problems.lines


def test_config_check_names_a_missing_or_wrong_tiny_vae(tiny: Path, tmp_path: Path):
    from frame.worker.checks import deep_problems

    def problems(state: Path, value: str) -> list[str]:
        config = make_config(state, model={"source": "demo", "vae_decoder": value})
        return [message for path, message in deep_problems(config) if path == ("model", "vae_decoder")]

    assert problems(tiny, "taesd") == [] and problems(tiny, "") == []
    assert "frame model import --tiny-vae taesd" in problems(tmp_path, "taesd")[0]
    assert "use taesd" in problems(tiny, "taesdxl")[0]  # the demo model is SD 1.x
