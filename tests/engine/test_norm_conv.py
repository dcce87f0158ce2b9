"""GroupNorm → [SiLU] → Conv as GroupNormStats + NormConv (frame/engine/passes/norm_conv.py): fused results
match onnxruntime and the unfused graph; patterns that must not fuse do not; operands that are not
a per-channel GroupNorm at run time fall back; 8-bit weights are still decoded per block around it."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from frame.engine import load_model
from frame.engine.passes import order as pass_order  # the pass list calls fuse_* through its module
from frame.engine.passes import weight_decoding
from tests.engine import builders
from tests.engine.test_weight_decoding import _quantized

RNG = np.random.default_rng(11)


def norm_conv_model(tmp_path, *, n=1, c=8, groups=4, hw=(6, 7), m=5, kernel=3, pads=1, strides=None, act=True,
                    gamma_shape=None, inorm_affine=False, extra_output=False, quantized=False, target0=0,
                    late_affine=False):
    """x → GroupNorm (as torch exports it) → [SiLU] → Conv → y. ``late_affine``: γ and β are (C,) weights
    unsqueezed to (C, 1, 1) by nodes that come after the InstanceNormalization (a valid order)."""
    h, w = hw
    gamma = (RNG.standard_normal(gamma_shape or (c, 1, 1)) + 1).astype(np.float32)
    beta = RNG.standard_normal((c, 1, 1)).astype(np.float32)
    weight = (RNG.standard_normal((m, c, kernel, kernel)) * 0.2).astype(np.float32)
    affine = ("gamma1d", "beta1d") if late_affine else ("gamma", "beta")
    inits = [numpy_helper.from_array(np.array([target0, groups, -1], np.int64), "target"),
             numpy_helper.from_array(gamma.reshape(-1) if late_affine else gamma, affine[0]),
             numpy_helper.from_array(beta.reshape(-1) if late_affine else beta, affine[1]),
             numpy_helper.from_array(RNG.standard_normal(m).astype(np.float32), "bias")]
    s = RNG.standard_normal(groups).astype(np.float32) if inorm_affine else np.ones(groups, np.float32)
    b = RNG.standard_normal(groups).astype(np.float32) if inorm_affine else np.zeros(groups, np.float32)
    inits += [numpy_helper.from_array(s, "s"), numpy_helper.from_array(b, "b")]
    nodes = []
    if quantized:
        more, dq = _quantized("w", weight, 0, np.uint8)
        inits += more
        nodes.append(dq)
    else:
        inits.append(numpy_helper.from_array(weight, "w"))
    nodes += [
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("InstanceNormalization", ["r", "s", "b"], ["i"], epsilon=1e-5),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Reshape", ["i", "shape"], ["back"]),
    ]
    if late_affine:
        inits.append(numpy_helper.from_array(np.array([1, 2], np.int64), "hw_axes"))
        nodes += [helper.make_node("Unsqueeze", ["gamma1d", "hw_axes"], ["gamma"]),
                  helper.make_node("Unsqueeze", ["beta1d", "hw_axes"], ["beta"])]
    nodes += [
        helper.make_node("Mul", ["back", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["normed"]),
    ]
    conv_in = "normed"
    if act:
        nodes += [helper.make_node("Sigmoid", ["normed"], ["sig"]), helper.make_node("Mul", ["normed", "sig"], ["a"])]
        conv_in = "a"
    attrs = {"pads": [pads] * 4}
    if strides:
        attrs["strides"] = strides
    nodes.append(helper.make_node("Conv", [conv_in, "w", "bias"], ["y"], **attrs))
    outputs = [builders.value("y", None)]
    if extra_output:
        outputs.append(builders.value("normed", None))
    proto = builders.model(nodes, [builders.value("x", [n, c, h, w])], outputs, inits)
    feeds = {"x": (RNG.standard_normal((n, c, h, w)) * 2 + 0.5).astype(np.float32)}
    return builders.save(proto, tmp_path / "m.onnx"), feeds


def run_both(path, feeds, monkeypatch):
    with load_model(path) as model:
        count = model.rewrites["norm_conv"]
        fused = model.run(feeds)
    with monkeypatch.context() as patch:
        patch.setattr(pass_order, "fuse_norm_conv", lambda nodes, outputs, weights: (nodes, 0))
        with load_model(path) as model:
            unfused = model.run(feeds)
    return count, fused, unfused, builders.ort_run(path, feeds)


def assert_agree(fused, unfused, expected, tolerance=1e-5):
    for name, want in expected.items():
        assert fused[name].shape == want.shape
        assert builders.rel_l2(fused[name], want) < tolerance, name
        assert builders.rel_l2(fused[name], unfused[name]) < tolerance, name


@pytest.mark.parametrize("options", [
    {}, {"act": False}, {"kernel": 1, "pads": 0}, {"kernel": 1, "pads": 0, "act": False}, {"n": 2},
    {"inorm_affine": True}, {"strides": [2, 2]}, {"hw": (1, 9)}, {"gamma_shape": (1, 8, 1, 1)},
    {"target0": 1}, {"c": 6, "groups": 3, "hw": (40, 33)}, {"late_affine": True}, {"late_affine": True, "act": False},
])
def test_group_norm_conv_chains_fuse_and_match(tmp_path, monkeypatch, options):
    path, feeds = norm_conv_model(tmp_path, **options)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert_agree(fused, unfused, expected)


def test_an_intermediate_read_elsewhere_prevents_fusion(tmp_path, monkeypatch):
    path, feeds = norm_conv_model(tmp_path, extra_output=True)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 0
    assert_agree(fused, unfused, expected)


def test_operands_that_are_not_per_channel_fall_back(tmp_path, monkeypatch):
    """γ of shape (1, 1, W) scales columns, not channels: the chain runs as exported, same numbers."""
    path, feeds = norm_conv_model(tmp_path, gamma_shape=(1, 1, 7))
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert_agree(fused, unfused, expected)


def test_quantized_weights_are_decoded_per_block_around_the_fused_conv(tmp_path, monkeypatch):
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 2)
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 2 * 8 * 9 * 4)  # two output channels per block
    path, feeds = norm_conv_model(tmp_path, m=7, quantized=True)
    with load_model(path) as model:
        ops = [s.node.op_type for s in model.steps]
        assert "GroupNormStats" in ops and "DecodedWeight" in ops and "NormConv" not in ops
        got = model.run(feeds)["y"]
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-5


def _most_big_arrays_alive(path, feeds, size) -> int:
    with load_model(path) as model:
        counts = []

        def after_step(i, env):
            counts.append(sum(isinstance(v, np.ndarray) and v.nbytes >= size for v in env.values()))

        model._executor.after_step = after_step
        model.run(feeds)
    return max(counts)


def test_the_normalised_activation_never_exists_whole(tmp_path, monkeypatch):
    """Fused, no array of x's size but x itself is ever alive; unfused, the normalised copy is."""
    path, feeds = norm_conv_model(tmp_path, c=16, hw=(64, 64))
    size = feeds["x"].nbytes
    assert _most_big_arrays_alive(path, feeds, size) == 1
    monkeypatch.setattr(pass_order, "fuse_norm_conv", lambda nodes, outputs, weights: (nodes, 0))
    assert _most_big_arrays_alive(path, feeds, size) == 2


@pytest.mark.parametrize("c, m, hw, layout, tile", [(80, 24, (18, 21), "bands", 2), (256, 160, (24, 24), "chunks", 2),
                                                     (64, 64, (33, 35), "bands", 4), (96, 160, (34, 33), "chunks", 4)])
def test_3x3_norm_convs_run_as_winograd_and_match(tmp_path, monkeypatch, c, m, hw, layout, tile):
    """The VAE's and UNet's resnet convs are NormConvs: they take Winograd F(2x2, 3x3) or F(4x4, 3x3)
    like a plain Conv, normalising each band (bands layout) or channel block (chunks layout) as it is
    copied."""
    from frame.engine.ops import conv_winograd

    path, feeds = norm_conv_model(tmp_path, c=c, groups=8, m=m, hw=hw)
    plans = []
    original = conv_winograd.winograd_conv3x3
    with monkeypatch.context() as patch:
        patch.setattr(conv_winograd, "winograd_conv3x3", lambda *args: plans.append(args[4]) or original(*args))
        with load_model(path) as model:
            assert model.rewrites["norm_conv"] == 1
            fused = model.run(feeds)
    assert plans and all((p.chunk < m) == (layout == "chunks") and p.tile == tile for p in plans)
    _, _, unfused, expected = run_both(path, feeds, monkeypatch)
    assert_agree(fused, unfused, expected)


def test_a_1x1_norm_conv_splits_each_block_product_over_the_cores(monkeypatch):
    """NormConv holds BLAS on one thread, so its 1x1 path must cut each block's product itself
    (np.matmul there left the second core idle for the transformers' proj_in convs)."""
    from frame.engine import blas_threads
    from frame.engine.ops import blocks
    from frame.engine.passes import norm_conv as nc

    monkeypatch.setattr(blas_threads.BlasThreads, "split_count", lambda self: 2)
    pieces: list[int] = []
    run_tasks = blocks.run_tasks

    def counted_run_tasks(tasks):
        pieces.append(len(tasks))
        run_tasks(tasks)

    monkeypatch.setattr(blocks, "run_tasks", counted_run_tasks)
    c, m, pixels = 64, 96, 3000
    x = RNG.standard_normal((c, pixels)).astype(np.float32)
    w = RNG.standard_normal((m, c)).astype(np.float32)
    table = np.stack([RNG.standard_normal(c), RNG.random(c) + 0.5, RNG.standard_normal(c)], axis=1)
    table = table.astype(np.float32)[None]
    out = np.empty((m, pixels), np.float32)
    nc._pixel_blocks(x, w, nc._transform(table[0], True), out)
    normed = (x - table[0, :, :1]) * table[0, :, 1:2] + table[0, :, 2:]
    expected = w.astype(np.float64) @ (normed / (1 + np.exp(-normed))).astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert pieces and all(count == 2 for count in pieces)


def test_a_1x1_norm_convs_normalisation_and_bias_are_shared_over_the_cores(tmp_path, monkeypatch, two_way_splits):
    """Each pixel block's copy and normalisation, and the bias added to the output, run one share of
    the channels per core (they ran on the caller's core while the other waited); results as before."""
    import threading

    from frame.engine.ops import blocks
    from frame.engine.passes import norm_conv as nc

    monkeypatch.setattr(blocks, "MIN_PARALLEL_BYTES", 1 << 16)  # these blocks are small, real ones 4 MB
    c, m, hw = 64, 96, (48, 48)
    path, feeds = norm_conv_model(tmp_path, c=c, groups=8, m=m, hw=hw, kernel=1, pads=0)
    normalised: dict[int, set[int]] = {}
    split: list[int] = []
    transform, split_rows = nc._transform, nc.split_rows

    def recorded_transform(table, act):
        apply = transform(table, act)

        def recorded(view, first_channel=0):
            normalised.setdefault(threading.get_ident(), set()).add(first_channel)
            apply(view, first_channel)

        return recorded

    def recorded_split_rows(fn, rows, nbytes):
        split.append(rows)
        split_rows(fn, rows, nbytes)

    with monkeypatch.context() as patch:
        patch.setattr(nc, "_transform", recorded_transform)
        patch.setattr(nc, "split_rows", recorded_split_rows)
        with load_model(path) as model:
            assert model.rewrites["norm_conv"] == 1
            fused = model.run(feeds)
    assert len(normalised) == 2 and set().union(*normalised.values()) == {0, c // 2}, normalised
    assert m in split  # the bias
    _, _, unfused, expected = run_both(path, feeds, monkeypatch)
    assert_agree(fused, unfused, expected)
