"""TAESD's graphs (frame.convert.graphs.taesd) against diffusers' AutoencoderTiny, through frame's engine.

The committed fixtures (tools/build_graph_fixtures.py, cases taesd_decoder / taesd_encoder) are
AutoencoderTiny's real block structure at 16 channels; test_graphs.py checks them to 1e-4 relative L2
and here the decode is held to the issue's picture bar, PSNR ≥ 40 dB. With torch installed, the
real 64-channel architecture is built, given random weights, and decoded and encoded the same way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from frame.convert.graphs import TinyVaeConfig, attach_weights, build_taesd_decoder, build_taesd_encoder, weight_specs
from frame.convert.graphs.taesd import from_taesd_keys
from frame.engine import load_model
from frame.errors import FrameError
from tests.convert.graph_cases import FIXTURES, load_case

MIN_PSNR = 40.0


def psnr(got: np.ndarray, want: np.ndarray) -> float:
    """PSNR of two [-1, 1] images as the [0, 1] pictures they become."""
    a = np.clip((got.astype(np.float64) + 1) / 2, 0, 1)
    b = np.clip((want.astype(np.float64) + 1) / 2, 0, 1)
    mse = float(np.mean((a - b) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


def _engine_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], folder: Path) -> dict[str, np.ndarray]:
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="model.onnx_data", size_threshold=0)
    with load_model(path, weights="nocache") as engine:
        return engine.run(feeds)


def test_fixture_decode_psnr_through_engine(tmp_path: Path):
    case = load_case(FIXTURES / "taesd_decoder")
    got = _engine_run(case.model(), case.feeds(), tmp_path)["sample"]
    want = case.expected["sample"]
    assert got.shape == want.shape == (1, 3, 32, 40)
    assert float(np.std(want)) > 0.05, "the fixture's picture is not flat (a flat one would prove nothing)"
    assert psnr(got, want) >= MIN_PSNR


def test_real_architecture_keys_and_shapes():
    """TAESD's published 64-channel layout: madebyollin's decoder keys, shifted by the Clamp, land on the graph's."""
    decoder = dict(weight_specs(build_taesd_decoder(TinyVaeConfig())))
    published = {"1.weight": (64, 4, 3, 3), "1.bias": (64,), "3.conv.0.weight": (64, 64, 3, 3),
                 "7.weight": (64, 64, 3, 3), "18.conv.4.bias": (64,), "19.weight": (3, 64, 3, 3), "19.bias": (3,)}
    mapping = from_taesd_keys(list(published), "decoder")
    assert {mapping[k]: v for k, v in published.items()} == {k: decoder[k] for k in mapping.values()}
    assert "decoder.layers.6.bias" not in decoder, "the upsampling convs have no bias"
    assert len(decoder) == 2 + 10 * 6 + 3 + 2  # conv_in, 10 blocks of 3 convs, 3 bias-free convs, conv_out
    encoder = dict(weight_specs(build_taesd_encoder(TinyVaeConfig())))
    assert from_taesd_keys(["0.weight", "14.bias"], "encoder") == {"0.weight": "encoder.layers.0.weight",
                                                                   "14.bias": "encoder.layers.14.bias"}
    assert encoder["encoder.layers.14.weight"] == (4, 64, 3, 3) and "encoder.layers.2.bias" not in encoder
    total = sum(int(np.prod(s)) for s in decoder.values())
    assert 1.1e6 < total < 1.3e6  # TAESD's ~1.2 M parameters per half


def test_foreign_keys_refused():
    with pytest.raises(FrameError, match="not a TAESD decoder weight"):
        from_taesd_keys(["0.weight"], "decoder")  # index 0 is the Clamp: it has no weights
    with pytest.raises(FrameError, match="not a TAESD encoder weight"):
        from_taesd_keys(["model.diffusion_model.x"], "encoder")


@pytest.mark.parametrize("config,field", [({"act_fn": "silu"}, "act_fn"), ({"upsample_fn": "bilinear"}, "upsample_fn"),
                                          ({"num_decoder_blocks": [3, 3]}, "num_decoder_blocks")])
def test_unsupported_configs_refused(config, field):
    with pytest.raises(FrameError, match=field):
        TinyVaeConfig.from_diffusers(config)


def test_diffusers_config_read():
    cfg = TinyVaeConfig.from_diffusers({"_class_name": "AutoencoderTiny", "decoder_block_out_channels": [8, 8],
                                        "num_decoder_blocks": [1, 1], "scaling_factor": 1.0, "latent_magnitude": 3})
    assert cfg.decoder_block_out_channels == (8, 8) and cfg.encoder_block_out_channels == (64,) * 4


def test_full_size_random_weights_match_diffusers(tmp_path: Path):
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(7)
    tiny = diffusers.AutoencoderTiny().eval()
    state = {k: v.detach().numpy() for k, v in tiny.state_dict().items()}
    rng = np.random.default_rng(7)
    latents = (2.0 * rng.standard_normal((1, 4, 8, 8))).astype(np.float32)
    pixels = rng.uniform(-1, 1, (1, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        want_image = tiny.decode(torch.from_numpy(latents)).sample.numpy()
        want_latents = tiny.encode(torch.from_numpy(pixels)).latents.numpy()
    decoder = attach_weights(build_taesd_decoder(TinyVaeConfig()), {k: v for k, v in state.items()
                                                                   if k.startswith("decoder.")})
    encoder = attach_weights(build_taesd_encoder(TinyVaeConfig()), {k: v for k, v in state.items()
                                                                   if k.startswith("encoder.")})
    (tmp_path / "d").mkdir()
    (tmp_path / "e").mkdir()
    got_image = _engine_run(decoder, {"latent_sample": latents}, tmp_path / "d")["sample"]
    got_latents = _engine_run(encoder, {"sample": pixels}, tmp_path / "e")["latent_sample"]
    assert psnr(got_image, want_image) >= MIN_PSNR
    err = np.linalg.norm(got_latents - want_latents) / np.linalg.norm(want_latents)
    assert err < 1e-4
