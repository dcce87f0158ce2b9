"""VAE decoders exported with a fixed input size: tiled anyway when no op bakes the size, rewritten at
load (``frame model convert --dynamic-shapes``'s rewrite, in memory) and tiled when one does, a plain
warning with the fix when neither works, and ``frame model convert --dynamic-shapes`` writing the rewrite."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from frame.cli.program import main
from frame.diffusion import RenderPlan, load_pipeline
from frame.diffusion.pipeline import engine_loader
from frame.diffusion.vae.shapes import check_vae
from frame.engine import load_model
from tests.engine.builders import save, value
from tests.painting import paint

ort = pytest.importorskip("onnxruntime")
SD15 = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sd15" / "model"
DYNAMIC_VAE = SD15 / "vae_decoder" / "model.onnx"


def _declared_static(path: Path, height: int = 8, width: int = 8) -> None:
    """The tiny dynamic VAE with a fixed input size declared (what a static export declares)."""
    model = onnx.load(str(DYNAMIC_VAE))
    for dim, size in zip(model.graph.input[0].type.tensor_type.shape.dim, (1, 4, height, width)):
        dim.Clear()
        dim.dim_value = size
    for dim, size in zip(model.graph.output[0].type.tensor_type.shape.dim, (1, 3, height * 8, width * 8)):
        dim.Clear()
        dim.dim_value = size
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def baked_vae(tmp_path_factory) -> Path:
    """A static export of the tiny VAE with the size folded into every shape constant: onnxruntime's
    constant folding of the model with a fixed 8x8 input (more baked Reshapes than torch's own static
    export, which bakes the mid-block attention's)."""
    folder = tmp_path_factory.mktemp("baked")
    _declared_static(folder / "fixed.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folder / "baked.onnx")
    ort.InferenceSession(str(folder / "fixed.onnx"), options, providers=["CPUExecutionProvider"])
    return folder / "baked.onnx"


def _pipeline_with_vae(tmp_path: Path, vae: Path) -> Path:
    folder = tmp_path / "pipe"
    shutil.copytree(SD15, folder)
    shutil.copy(vae, folder / "vae_decoder" / "model.onnx")
    return folder


def _render(folder: Path, **kwargs) -> np.ndarray:
    pipe = load_pipeline(folder, plan=RenderPlan(vae_tile=8, vae_tile_overlap=2), **kwargs)
    return np.asarray(paint(pipe, "a red barn", steps=1, guidance=7.5, seed=5, width=128, height=64))


def test_a_static_decoder_no_op_depends_on_is_decoded_in_tiles(tmp_path):
    """Declared 8x16 = the whole latent: it used to be decoded in one piece; now in 8x8 tiles."""
    vae = tmp_path / "static.onnx"
    _declared_static(vae, 8, 16)
    shapes = check_vae(str(vae), tile=8)
    assert shapes.static == (8, 16) and shapes.tileable and shapes.warning("x") is None
    decoded_shapes = []

    def loader(source):
        model = load_model(source)
        if source.endswith("vae_decoder/model.onnx"):
            run = model.run
            model.run = lambda feeds, *a: decoded_shapes.append(feeds["latent_sample"].shape) or run(feeds, *a)
        return model

    got = _render(_pipeline_with_vae(tmp_path, vae), loader=loader)
    assert set(decoded_shapes) == {(1, 4, 8, 8)} and len(decoded_shapes) == 3  # 16x8 latent, 8x8 tiles
    np.testing.assert_array_equal(got, _render(SD15))  # exactly what the dynamic export gives


def _counting_loader(decoded_shapes: list):
    """frame's engine loader that records the latent shape of every VAE decoder run."""
    load = engine_loader()

    def loader(source, **kwargs):
        model = load(source, **kwargs)
        if source.endswith("vae_decoder/model.onnx"):
            run = model.run
            model.run = lambda feeds, *a: decoded_shapes.append(feeds["latent_sample"].shape) or run(feeds, *a)
        return model

    return loader


def test_a_decoder_that_bakes_its_size_is_rewritten_at_load_and_tiled(tmp_path, baked_vae, caplog):
    """The static export used to be decoded whole (606 MB for SD 1.5 at 512x512, killed on a Pi); now
    the --dynamic-shapes rewrite runs in memory at load and it is decoded in 8x8 tiles like the
    dynamic export, with the same pixels."""
    shapes = check_vae(str(baked_vae), tile=8)
    assert shapes.static == (8, 8) and shapes.tileable and shapes.rewrite
    assert "Reshape" in shapes.baked[0] and shapes.warning("x") is None
    folder = _pipeline_with_vae(tmp_path, baked_vae)
    decoded_shapes = []
    with caplog.at_level(logging.INFO):
        got = _render(folder, loader=_counting_loader(decoded_shapes))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("rewritten at load" in r.getMessage() for r in caplog.records)
    assert set(decoded_shapes) == {(1, 4, 8, 8)} and len(decoded_shapes) == 3  # 16x8 latent, 8x8 tiles
    want = _render(SD15)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # onnxruntime's folding reorders float sums
    latent = {"latent_sample": np.random.default_rng(0).standard_normal((1, 4, 12, 20)).astype(np.float32)}
    with engine_loader()(str(baked_vae), dynamic_shapes=True) as rewritten, load_model(str(DYNAMIC_VAE)) as dynamic:
        assert [i.shape for i in rewritten.inputs] == [(1, 4, "height", "width")]
        np.testing.assert_allclose(rewritten.run(latent)["sample"], dynamic.run(latent)["sample"], atol=1e-4)


def _untileable_vae(folder: Path) -> Path:
    """A decoder with a dense layer over the flattened latent (its weight has C*H*W rows): no rewrite
    can make it run at another size."""
    w = numpy_helper.from_array(np.eye(256, dtype=np.float32), "w")
    flat = numpy_helper.from_array(np.array([1, 256], np.int64), "flat")
    back = numpy_helper.from_array(np.array([1, 4, 8, 8], np.int64), "back")
    scales = numpy_helper.from_array(np.array([1, 1, 8, 8], np.float32), "scales")
    nodes = [helper.make_node("Reshape", ["latent_sample", "flat"], ["f"]),
             helper.make_node("MatMul", ["f", "w"], ["m"]), helper.make_node("Reshape", ["m", "back"], ["r"]),
             helper.make_node("Resize", ["r", "", "scales"], ["sample"], mode="nearest")]
    graph = helper.make_graph(nodes, "g", [value("latent_sample", [1, 4, 8, 8])], [value("sample", [1, 4, 64, 64])],
                              [w, flat, back, scales])
    return Path(save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "dense.onnx"))


def test_a_decoder_that_cannot_be_tiled_is_named_with_the_fix(tmp_path, caplog):
    vae = _untileable_vae(tmp_path)
    shapes = check_vae(str(vae), tile=8)
    assert shapes.static == (8, 8) and not shapes.tileable and not shapes.rewrite
    assert "Reshape" in shapes.baked[0]
    folder = _pipeline_with_vae(tmp_path, vae)
    with caplog.at_level(logging.WARNING):
        load_pipeline(folder)
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "fixed 8x8 latent input" in warning and "cannot be decoded in tiles" in warning
    assert "--dynamic-shapes' does not handle it" in warning
    assert "re-export the VAE decoder with dynamic axes" in warning


def test_config_check_names_precision_and_the_rewritten_or_untileable_decoder(tmp_path, baked_vae, capsys):
    folder = _pipeline_with_vae(tmp_path, baked_vae)
    config = tmp_path / "config.yaml"
    config.write_text(f"model:\n  source: {folder}\n")
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    assert "unet fp32" in out and "text_encoder fp32" in out
    assert "warning" not in out and "rewritten at load" in out and "decoded in tiles" in out
    shutil.copy(_untileable_vae(tmp_path), folder / "vae_decoder" / "model.onnx")
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    assert "model.source: warning: vae_decoder" in out and "dynamic axes" in out
    converted = tmp_path / "uint8"
    shutil.copy(baked_vae, folder / "vae_decoder" / "model.onnx")
    assert main(["model", "convert", str(folder), str(converted), "--weights", "uint8", "--dynamic-shapes"]) == 0
    config.write_text(f"model:\n  source: {converted}\n")
    capsys.readouterr()
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    assert "unet uint8" in out and "vae_decoder uint8" in out and "warning" not in out and "rewritten" not in out


def test_dynamic_shapes_rewrite_matches_the_dynamic_export_at_any_size(tmp_path, baked_vae):
    src = _pipeline_with_vae(tmp_path, baked_vae)
    dst = tmp_path / "dynamic"
    assert main(["model", "convert", str(src), str(dst), "--weights", "fp16", "--dynamic-shapes"]) == 0
    vae = dst / "vae_decoder" / "model.onnx"
    declared = [d.dim_param or d.dim_value for d in onnx.load(str(vae), load_external_data=False).graph.input[0]
                .type.tensor_type.shape.dim]
    assert declared == [1, 4, "height", "width"] and check_vae(str(vae)).static is None
    reference = ort.InferenceSession(str(DYNAMIC_VAE), providers=["CPUExecutionProvider"])
    session = ort.InferenceSession(str(vae), providers=["CPUExecutionProvider"])
    with load_model(str(vae)) as model:
        for shape in ((1, 4, 8, 8), (1, 4, 12, 20), (1, 4, 5, 3)):
            latent = {"latent_sample": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
            want = reference.run(None, latent)[0]
            assert want.shape == (1, 3, shape[2] * 8, shape[3] * 8)
            np.testing.assert_allclose(session.run(None, latent)[0], want, atol=2e-2)  # fp16 weights
            np.testing.assert_allclose(model.run(latent)["sample"], want, atol=2e-2)


def test_a_size_that_cannot_be_made_dynamic_exits_2_naming_it(tmp_path, capsys):
    """A dense layer over the flattened image (its weight has H*W*C rows) fixes the size for good."""
    w = numpy_helper.from_array(np.ones((256, 256), np.float32), "w")
    flat = numpy_helper.from_array(np.array([1, 256], np.int64), "flat")
    back = numpy_helper.from_array(np.array([1, 4, 8, 8], np.int64), "back")
    nodes = [helper.make_node("Reshape", ["latent_sample", "flat"], ["f"]),
             helper.make_node("MatMul", ["f", "w"], ["m"]), helper.make_node("Reshape", ["m", "back"], ["sample"])]
    graph = helper.make_graph(nodes, "g", [value("latent_sample", [1, 4, 8, 8])], [value("sample", [1, 4, 8, 8])],
                              [w, flat, back])
    src = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    assert main(["model", "convert", src, str(tmp_path / "out.onnx"), "--weights", "fp16", "--dynamic-shapes"]) == 2
    err = capsys.readouterr().err
    assert "cannot make the input size dynamic" in err and "re-export" in err
    assert not (tmp_path / "out.onnx").exists() and not (tmp_path / "out.onnx_data").exists()


def test_resize_to_constant_sizes_becomes_resize_by_scales(tmp_path):
    sizes = numpy_helper.from_array(np.array([1, 4, 16, 16], np.int64), "sizes")
    nodes = [helper.make_node("Resize", ["latent_sample", "", "", "sizes"], ["sample"], mode="nearest")]
    graph = helper.make_graph(nodes, "g", [value("latent_sample", [1, 4, 8, 8])], [value("sample", [1, 4, 16, 16])],
                              [sizes])
    src = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    assert main(["model", "convert", src, str(tmp_path / "out.onnx"), "--weights", "fp16", "--dynamic-shapes"]) == 0
    x = {"latent_sample": np.arange(4 * 5 * 6, dtype=np.float32).reshape(1, 4, 5, 6)}
    got = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"]).run(None, x)[0]
    np.testing.assert_array_equal(got, x["latent_sample"].repeat(2, axis=2).repeat(2, axis=3))
