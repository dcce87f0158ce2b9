"""Resize(nearest ×2) → Conv(3×3) fusion: fused, unfused and onnxruntime agree; every condition that
must prevent the fusion does; run-time operands that are not ×2/3×3 fall back to Resize + Conv."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.engine import load_model
from frame.engine.passes import order as pass_order  # the pass list calls fuse_* through its module
from tests.engine import builders

RNG = np.random.default_rng(7)


def pair_model(tmp_path, *, c=4, m=6, hw=(32, 32), mode="nearest", ctm="asymmetric", nearest="floor",
               scales=(1, 1, 2, 2), sizes=None, store="constant", pads=(1, 1, 1, 1), strides=None,
               dilations=None, kernel=3, group=1, bias=True, opset=17, axes=None, weight_input=False,
               resize_is_output=False, second_consumer=False):
    """x → Resize → Conv → y, built with onnx.helper; returns (path, feeds).

    ``store`` says how the scales/sizes tensor is held: a Constant node, an inline initializer
    (value known at load) or a raw-data initializer (streamed, only known at run time).
    """
    h, w = hw
    weight = RNG.standard_normal((m, c // group, kernel, kernel)).astype(np.float32) * 0.2
    feeds = {"x": RNG.standard_normal((1, c, h, w)).astype(np.float32)}
    inits = [] if weight_input else [numpy_helper.from_array(weight, "w")]
    if weight_input:
        feeds["w"] = weight
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(m).astype(np.float32), "b"))
    values = np.array(sizes if sizes is not None else scales, np.int64 if sizes is not None else np.float32)
    nodes = []
    if store == "constant":
        nodes.append(helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(values)))
    elif store == "inline":
        elem = TensorProto.INT64 if sizes is not None else TensorProto.FLOAT
        inits.append(helper.make_tensor("s", elem, [values.size], values.tolist()))
    else:
        inits.append(numpy_helper.from_array(values, "s"))
    roi = ""
    if opset < 13:  # roi and scales are not yet optional: empty tensors
        roi = "roi"
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [0], []))
    resize_inputs = ["x", roi, "", "s"] if sizes is not None else ["x", roi, "s"]
    resize_attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest}
    if axes is not None:
        resize_attrs["axes"] = axes
    nodes.append(helper.make_node("Resize", resize_inputs, ["u"], name="resize", **resize_attrs))
    conv_attrs = {"pads": list(pads), "group": group}
    conv_attrs.update({k: v for k, v in (("strides", strides), ("dilations", dilations)) if v is not None})
    nodes.append(helper.make_node("Conv", ["u", "w"] + (["b"] if bias else []), ["y"], name="conv", **conv_attrs))
    outputs = [builders.value("y", None)]
    if resize_is_output:
        outputs.append(builders.value("u", None))
    if second_consumer:
        nodes.append(helper.make_node("Neg", ["u"], ["z"], name="neg"))
        outputs.append(builders.value("z", None))
    inputs = [builders.value("x", [1, c, h, w])] + ([builders.value("w", list(weight.shape))] if weight_input else [])
    proto = builders.model(nodes, inputs, outputs, inits, opset=opset)
    return builders.save(proto, tmp_path / "m.onnx"), feeds


def run_both(path, feeds, monkeypatch):
    """(fused count, fused outputs, unfused outputs, onnxruntime outputs)."""
    with load_model(path) as model:
        count = model.rewrites["upsample_conv"]
        fused = model.run(feeds)
    with monkeypatch.context() as patch:
        patch.setattr(pass_order, "fuse_upsample_conv", lambda nodes, outputs, weights: (nodes, 0))
        with load_model(path) as model:
            assert not any(s.node.op_type == "UpsampleConv" for s in model.steps)
            unfused = model.run(feeds)
    return count, fused, unfused, builders.ort_run(path, feeds)


def assert_agree(fused, unfused, expected):
    for name, want in expected.items():
        assert fused[name].shape == want.shape
        assert builders.rel_l2(fused[name], want) < 1e-5, name
        assert builders.rel_l2(unfused[name], want) < 1e-5, name


@pytest.mark.parametrize("ctm,nearest", [("asymmetric", "floor"), ("asymmetric", "round_prefer_floor"),
                                          ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                                          ("pytorch_half_pixel", "round_prefer_floor"),
                                          ("tf_half_pixel_for_nn", "floor")])
def test_exact_modes_fuse_and_match(tmp_path, monkeypatch, ctm, nearest):
    path, feeds = pair_model(tmp_path, ctm=ctm, nearest=nearest)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert_agree(fused, unfused, expected)


@pytest.mark.parametrize("options", [
    {"store": "inline"}, {"store": "streamed"}, {"sizes": (1, 4, 64, 64)}, {"sizes": (1, 4, 64, 64), "store": "inline"},
    {"group": 2}, {"bias": False}, {"hw": (5, 7)}, {"hw": (40, 36), "c": 6, "m": 4, "group": 2},
    {"opset": 11, "store": "inline"}, {"opset": 18, "store": "streamed"},
])
def test_variants_fuse_and_match(tmp_path, monkeypatch, options):
    path, feeds = pair_model(tmp_path, **options)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert_agree(fused, unfused, expected)


@pytest.mark.parametrize("options", [
    {"mode": "linear", "ctm": "half_pixel"}, {"ctm": "asymmetric", "nearest": "ceil"},
    {"ctm": "asymmetric", "nearest": "round_prefer_ceil"}, {"ctm": "half_pixel", "nearest": "floor"},
    {"ctm": "align_corners", "nearest": "floor"}, {"scales": (1, 1, 3, 3)}, {"scales": (1, 1, 2, 3), "store": "inline"},
    {"resize_is_output": True}, {"second_consumer": True}, {"pads": (0, 0, 0, 0)}, {"pads": (1, 1, 0, 0)},
    {"strides": [2, 2]}, {"dilations": [2, 2]}, {"kernel": 1}, {"kernel": 5},
    {"opset": 18, "axes": [2, 3], "scales": (2, 2)},
])
def test_conditions_prevent_fusion(tmp_path, monkeypatch, options):
    path, feeds = pair_model(tmp_path, **options)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 0
    assert_agree(fused, unfused, expected)


@pytest.mark.parametrize("options", [
    {"scales": (1, 1, 3, 3), "store": "streamed"},  # only known at run time
    {"sizes": (1, 4, 64, 48)},  # sizes depend on the input's shape
    {"weight_input": True, "kernel": 1},  # the weight's shape is only known at run time
])
def test_runtime_operands_fall_back_to_resize_and_conv(tmp_path, monkeypatch, options):
    path, feeds = pair_model(tmp_path, **options)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert_agree(fused, unfused, expected)


def test_fused_step_streams_its_weights(tmp_path):
    path, feeds = pair_model(tmp_path, store="streamed")
    with load_model(path, weights="nocache") as model:
        step = next(s for s in model.steps if s.node.op_type == "UpsampleConv")
        assert {r.name for r in step.fetch} == {r.name for r in step.release} == {"w", "b", "s"}
        assert [s.node.op_type for s in model.steps] == ["UpsampleConv"]
        held = []
        model._executor.after_step = lambda i, env: held.append(sorted(env))
        model.run(feeds)
    assert held == [["y"]]  # x, the weights and the scales are gone after the step


@pytest.mark.parametrize("name", ["vae_decoder_ts17_static_fp16w", "vae_decoder_dynamo18_dynamic",
                                  "unet_sd15_ts14_dynamic"])
def test_exported_up_blocks_are_fused(name):
    """Every up block's upsampler of the committed exports is fused (their outputs are checked
    against onnxruntime's in test_engine_fixtures)."""
    with load_model(f"tests/fixtures/engine/{name}/model.onnx") as model:
        resizes = sum(1 for s in model.steps if s.node.op_type == "Resize")
        assert model.rewrites["upsample_conv"] >= 1 and resizes == 0
