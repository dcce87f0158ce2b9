"""VAE encoding: the three export styles, tiles that add up to the whole, and the noise each tile gets.

The encoders here are small ONNX graphs built with onnx.helper whose ops are all local (8x8 average
pool, 1x1 conv), so a tiled encode must equal the whole one; the real tiny encoders are checked
against diffusers in test_img2img_equivalence.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.diffusion.pipeline import engine_loader
from frame.diffusion.vae import encoder
from frame.errors import FrameError, UsageError

WEIGHTS = np.random.default_rng(0).standard_normal((8, 3, 1, 1)).astype(np.float32) * 0.5


def _encoder(path, style: str, static: tuple[int, int] | None = None) -> str:
    dims = [1, 3, *(static or ("height", "width"))]
    nodes = [helper.make_node("AveragePool", ["sample"], ["pooled"], kernel_shape=[8, 8], strides=[8, 8]),
             helper.make_node("Conv", ["pooled", "w"], ["moments"])]
    if style == "parameters":
        nodes.append(helper.make_node("Identity", ["moments"], ["latent_parameters"]))
        output = "latent_parameters"
    else:
        nodes.append(helper.make_node("Split", ["moments"], ["mean", "logvar"], axis=1, num_outputs=2))
        output = "latent_sample"
        if style == "mean":
            nodes.append(helper.make_node("Identity", ["mean"], ["latent_sample"]))
        else:
            nodes += [helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.float32(0.5))),
                      helper.make_node("Mul", ["logvar", "half"], ["half_logvar"]),
                      helper.make_node("Exp", ["half_logvar"], ["std"]),
                      helper.make_node("Shape", ["mean"], ["shape"]),
                      helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
                      helper.make_node("RandomNormalLike", ["zeros"], ["noise"], dtype=TensorProto.FLOAT),
                      helper.make_node("Mul", ["std", "noise"], ["scaled"]),
                      helper.make_node("Add", ["mean", "scaled"], ["latent_sample"])]
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("sample", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(WEIGHTS, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.save_model(model, str(path))
    return str(path)


def _expected(pixels: np.ndarray, noise: np.ndarray, style: str) -> np.ndarray:
    _, _, height, width = pixels.shape
    pooled = pixels.reshape(1, 3, height // 8, 8, width // 8, 8).mean(axis=(3, 5))
    moments = np.einsum("oc,bchw->bohw", WEIGHTS[:, :, 0, 0], pooled)
    mean, logvar = moments[:, :4], moments[:, 4:]
    if style == "mean":
        return mean
    return mean + np.exp(0.5 * np.clip(logvar, -30, 20)) * noise


def _inputs(height: int = 96, width: int = 160):
    rng = np.random.default_rng(1)
    pixels = rng.uniform(-1, 1, (1, 3, height, width)).astype(np.float32)
    noise = rng.standard_normal((1, 4, height // 8, width // 8)).astype(np.float32)
    return pixels, noise


@pytest.mark.parametrize("style", ["sampled", "parameters", "mean"])
@pytest.mark.parametrize("tiled", [False, True])
def test_every_style_whole_or_tiled_gives_the_posterior_sample(tmp_path, style, tiled):
    source = _encoder(tmp_path / "e.onnx", style)
    pixels, noise = _inputs()
    got = encoder.encode(engine_loader(), source, pixels, noise, 0.5, tile=5, overlap=2, tiled=tiled)
    np.testing.assert_allclose(got, 0.5 * _expected(pixels, noise, style), rtol=1e-5, atol=1e-5)


def test_style_is_read_from_outputs_and_ops(tmp_path):
    load = engine_loader()
    for style, want in (("sampled", encoder.SAMPLED), ("parameters", encoder.PARAMETERS),
                        ("mean", encoder.MEAN)):
        with load(_encoder(tmp_path / f"{style}.onnx", style)) as model:
            assert encoder.encoder_style(model) == want


def test_tiles_follow_the_size_and_report_progress(tmp_path):
    source = _encoder(tmp_path / "e.onnx", "parameters")
    pixels, noise = _inputs(64, 64)
    seen = []
    encoder.encode(engine_loader(), source, pixels, noise, 1.0, tile=8, overlap=2, progress=seen.append)
    assert seen == [1.0]  # 8x8 latent: one piece
    seen.clear()
    encoder.encode(engine_loader(), source, pixels, noise, 1.0, tile=4, overlap=1, progress=seen.append)
    assert seen == [i / 9 for i in range(1, 10)]  # starts 0, 3, 4 on both axes


def test_static_encoder_runs_in_tiles_of_its_size(tmp_path):
    source = _encoder(tmp_path / "e.onnx", "sampled", static=(32, 32))
    pixels, noise = _inputs(64, 96)
    got = encoder.encode(engine_loader(), source, pixels, noise, 1.0, tiled=False)
    np.testing.assert_allclose(got, _expected(pixels, noise, "sampled"), rtol=1e-5, atol=1e-5)
    with pytest.raises(UsageError, match="fixed input 32x32 pixels; the picture is only 16x16"):
        encoder.encode(engine_loader(), source, *_inputs(16, 16), 1.0)


def test_an_encoder_without_the_expected_names_is_refused(tmp_path):
    path = tmp_path / "bad.onnx"
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.save_model(model, str(path))
    with pytest.raises(FrameError, match="no 'sample' input"):
        encoder.encode(engine_loader(), str(path), *_inputs(16, 16), 1.0)


def test_tile_noise_hands_out_one_draw_of_the_right_shape():
    noise = np.ones((1, 4, 2, 3), np.float32)
    draw = encoder.TileNoise(noise)
    assert np.array_equal(draw.standard_normal((1, 4, 2, 3)), noise)
    with pytest.raises(FrameError, match="one draw"):
        draw.standard_normal((1, 4, 2, 3))
    with pytest.raises(FrameError, match=r"shape \(1, 4, 3, 3\)"):
        encoder.TileNoise(noise).standard_normal((1, 4, 3, 3))
