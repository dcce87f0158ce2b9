"""A model served over HTTP: small files fetched once into the cache, weights streamed by the engine.

Uses the engine tests' Range-capable HTTP server (a real server on 127.0.0.1).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from frame.diffusion import load_pipeline
from frame.diffusion.model_files import ModelFiles
from frame.diffusion.model_info import read_model_info
from frame.errors import FrameError, UsageError
from frame.models import demo_model_path
from tests.engine.http_server import RangeServer
from tests.painting import paint


@pytest.fixture
def server():
    served = RangeServer(str(demo_model_path())).start()
    yield served
    served.stop()


def _gets(server: RangeServer, path: str) -> int:
    return sum(1 for p, _ in server.requests if p == path)


def test_small_files_are_fetched_once(server, tmp_path):
    url = server.url("")
    files = ModelFiles(url, cache_dir=tmp_path)
    assert read_model_info(files).kind == "sd15"
    assert (files.local_folder("tokenizer") / "vocab.json").is_file()
    assert files.onnx("unet") == url + "unet/model.onnx"
    again = ModelFiles(url, cache_dir=tmp_path)
    read_model_info(again)
    again.local_folder("tokenizer")
    assert _gets(server, "/model_index.json") == 1 and _gets(server, "/tokenizer/vocab.json") == 1
    with pytest.raises(FrameError, match="missing model file: .*HTTP 404"):
        again.json("nothing/here.json")


def test_render_from_url_matches_local_folder(server, tmp_path):
    args = dict(steps=1, guidance=0, seed=3, width=32, height=32)
    remote = paint(load_pipeline(server.url(""), cache_dir=tmp_path), "a cat", **args)
    local = paint(load_pipeline(demo_model_path()), "a cat", **args)
    assert np.array_equal(np.asarray(remote), np.asarray(local))
    ranged = [p for p, r in server.requests if r is not None]
    assert "/unet/model.onnx" in ranged  # weights came as Range requests, not cached files
    assert not (tmp_path / "unet").exists() and not any(tmp_path.rglob("model.onnx"))


def _night(config, args):
    """One render with the configured pipeline; returns the image and the UNet model that ran."""
    from frame.diffusion.configured import load_configured_pipeline

    pipe = load_configured_pipeline(config)
    models, load = [], pipe.load
    pipe.load = lambda source: models.append(load(source)) or models[-1]
    image = np.asarray(paint(pipe, "a cat", **args))
    return image, [m for m in models if "unet" in m.source][-1]


def test_configured_weight_cache_serves_later_nights(server, tmp_path):
    from frame.config import load_config

    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  source: {server.url('')}\n"
                    "  cache:\n    enabled: true\n    max_mb: 64\n")
    config = load_config(path, environ={})
    args = dict(steps=1, guidance=0, seed=3, width=32, height=32)
    first, unet = _night(config, args)
    weights = sum(ref.nbytes for ref in unet.streamed_weights)
    # streamed (with the few bytes of protobuf framing between embedded weights), plus the version probe
    assert weights + 1 <= unet.fetch_stats.bytes["http"] < 1.01 * weights
    assert list((tmp_path / "state" / "weight-cache").rglob("*.w"))
    second, unet = _night(config, args)
    assert unet.fetch_stats.bytes["cache"] == weights and unet.fetch_stats.bytes["http"] == 1
    assert np.array_equal(first, second)


def test_img2img_from_url_matches_local_folder_and_caches_no_weights(server, tmp_path):
    picture = Image.linear_gradient("L").convert("RGB").resize((32, 32))
    args = dict(steps=2, guidance=0, seed=3, width=32, height=32, init_image=picture, strength=0.5)
    remote = paint(load_pipeline(server.url(""), cache_dir=tmp_path), "a cat", **args)
    local = paint(load_pipeline(demo_model_path()), "a cat", **args)
    assert np.array_equal(np.asarray(remote), np.asarray(local))
    assert ("HEAD /vae_encoder/model.onnx", None) in server.requests  # asked, not downloaded
    assert "/vae_encoder/model.onnx" in [p for p, r in server.requests if r is not None]
    assert not any(tmp_path.rglob("model.onnx"))


def test_img2img_from_url_without_encoder_says_so(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    for item in demo_model_path().iterdir():
        if item.name != "vae_encoder":
            (folder / item.name).symlink_to(item)
    served = RangeServer(str(folder)).start()
    try:
        pipe = load_pipeline(served.url(""), cache_dir=tmp_path / "cache")
        picture = Image.linear_gradient("L").convert("RGB")
        with pytest.raises(UsageError, match="has no vae_encoder/model.onnx"):
            paint(pipe, "a cat", steps=2, width=32, height=32, init_image=picture, strength=0.5)
    finally:
        served.stop()
