"""The GEGLU feed-forward in blocks of hidden channels (frame/engine/passes/geglu.py): fused results match
onnxruntime and the unfused graph for float32, 8-bit and fp16 weights; Slice bounds computed from
the projection's Shape (as torch's chunk exports them) still work; column splits that are not two
contiguous halves fall back; the projection-sized activation never exists."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.engine import load_model
from frame.engine.passes import geglu_kernel
from frame.engine.passes import order as pass_order  # the pass list calls fuse_* through its module
from tests.engine import builders
from tests.engine.test_weight_decoding import _quantized

RNG = np.random.default_rng(5)


def geglu_model(tmp_path, *, tokens=10, c=8, inner=6, weights="fp32", bounds="constant", hidden_first=True,
                tanh=False, steps=None, fp16_bias=False, linear="matmul"):
    """x → MatMul(W1) + b1 → hidden | gate → hidden * gelu(gate) → MatMul(W2) + b2 → y; ``linear="gemm"``:
    Gemm(x, W1ᵀ, b1, transB=1) … Gemm(·, W2ᵀ, b2, transB=1) on a 2-D x, as frame.convert.graphs writes
    a Linear (weights stored (out, in), the biases inside the Gemms)."""
    gemm = linear == "gemm"
    w1 = (RNG.standard_normal((c, 2 * inner)) * 0.4).astype(np.float32)
    w2 = (RNG.standard_normal((inner, c)) * 0.4).astype(np.float32)
    if gemm:
        w1, w2 = np.ascontiguousarray(w1.T), np.ascontiguousarray(w2.T)
    inits = [numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "b2")]
    nodes = []
    b1 = RNG.standard_normal(2 * inner).astype(np.float32)
    if fp16_bias:  # as fp16 exports store it: float16 behind Cast(to=FLOAT)
        inits.append(numpy_helper.from_array(b1.astype(np.float16), "b1_16"))
        nodes.append(helper.make_node("Cast", ["b1_16"], ["b1"], to=TensorProto.FLOAT))
    else:
        inits.append(numpy_helper.from_array(b1, "b1"))
    for name, w in (("w1", w1), ("w2", w2)):
        if weights == "uint8":
            more, dq = _quantized(name, w, 1, np.uint8)
            inits += more
            nodes.append(dq)
        elif weights == "fp16":
            inits.append(numpy_helper.from_array(w.astype(np.float16), f"{name}_16"))
            nodes.append(helper.make_node("Cast", [f"{name}_16"], [name], to=TensorProto.FLOAT))
        else:
            inits.append(numpy_helper.from_array(w, name))
    if gemm:
        nodes.append(helper.make_node("Gemm", ["x", "w1", "b1"], ["p"], transB=1))
    else:
        nodes += [helper.make_node("MatMul", ["x", "w1"], ["p0"]), helper.make_node("Add", ["b1", "p0"], ["p"])]
    if bounds == "shape":  # torch's chunk(2, -1): half = (last + 1) // 2 from Shape(p)
        inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                  (("minus1", -1), ("one", 1), ("two", 2), ("zero", [0]), ("axes", [-1]))]
        nodes += [helper.make_node("Shape", ["p"], ["shape"]),
                  helper.make_node("Gather", ["shape", "minus1"], ["last"], axis=0),
                  helper.make_node("Add", ["last", "one"], ["plus"]),
                  helper.make_node("Div", ["plus", "two"], ["half0"]),
                  helper.make_node("Unsqueeze", ["half0", "zero"], ["half"]),
                  helper.make_node("Mul", ["half", "two"], ["end"]),
                  helper.make_node("Slice", ["p", "zero", "half", "axes"], ["first"]),
                  helper.make_node("Slice", ["p", "half", "end", "axes"], ["second"])]
    else:
        if steps:  # interleaved columns: not two contiguous halves
            ranges = ([0], [2 * inner], [steps]), ([1], [2 * inner], [steps])
        else:
            ranges = ([0], [inner], [1]), ([inner], [2 * inner], [1])
        for k, (start, end, step) in enumerate(ranges):
            inits += [numpy_helper.from_array(np.array(v, np.int64), f"{n}{k}") for n, v in
                      (("start", start), ("end", end), ("axis", [-1]), ("step", step))]
            nodes.append(helper.make_node("Slice", ["p", f"start{k}", f"end{k}", f"axis{k}", f"step{k}"],
                                          ["first" if k == 0 else "second"]))
    for n, v in (("sqrt2", np.sqrt(2.0)), ("one_f", 1.0), ("half_f", 0.5), ("c044", 0.044715), ("k", 0.79788456)):
        inits.append(numpy_helper.from_array(np.array(v, np.float32), n))
    if tanh:  # gelu's tanh approximation: 0.5 g (1 + tanh(k (g + 0.044715 g^3)))
        chain = [("Mul", ["second", "second"], "g2"), ("Mul", ["g2", "second"], "g3"), ("Mul", ["g3", "c044"], "g3c"),
                 ("Add", ["second", "g3c"], "inner"), ("Mul", ["inner", "k"], "arg"), ("Tanh", ["arg"], "t"),
                 ("Add", ["t", "one_f"], "t1"), ("Mul", ["second", "t1"], "gt"), ("Mul", ["gt", "half_f"], "gate")]
        nodes += [helper.make_node(op, ins, [out]) for op, ins, out in chain]
    else:
        nodes += [helper.make_node("Div", ["second", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one_f"], ["e1"]), helper.make_node("Mul", ["second", "e1"], ["ge"]),
                  helper.make_node("Mul", ["ge", "half_f"], ["gate"])]
    nodes.append(helper.make_node("Mul", ["first", "gate"] if hidden_first else ["gate", "first"], ["prod"]))
    if gemm:
        nodes.append(helper.make_node("Gemm", ["prod", "w2", "b2"], ["y"], transB=1))
    else:
        nodes += [helper.make_node("MatMul", ["prod", "w2"], ["q"]), helper.make_node("Add", ["b2", "q"], ["y"])]
    shape = [tokens, c] if gemm else [1, tokens, c]
    proto = builders.model(nodes, [builders.value("x", shape)], [builders.value("y", None)], inits)
    feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
    return builders.save(proto, tmp_path / "m.onnx"), feeds


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(geglu_kernel, "MIN_BLOCK_CHANNELS", 2)
    monkeypatch.setattr(geglu_kernel, "BLOCK_BYTES", 2 * 10 * 4)  # two hidden channels of 10 tokens per block


def ort_plain(path, feeds):
    """onnxruntime without graph optimisations: its default ones change the numbers of DequantizeLinear
    weights (0.7 % off on this model, frame unfused included)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session.run(["y"], feeds)[0]


def run_both(path, feeds, monkeypatch):
    with load_model(path) as model:
        count = model.rewrites["geglu"]
        fused = model.run(feeds)["y"]
    with monkeypatch.context() as patch:
        patch.setattr(pass_order, "fuse_geglu", lambda nodes, outputs, weights: (nodes, 0))
        with load_model(path) as model:
            unfused = model.run(feeds)["y"]
    return count, fused, unfused, ort_plain(path, feeds)


@pytest.mark.parametrize("options", [
    {}, {"weights": "uint8"}, {"weights": "fp16"}, {"bounds": "shape"}, {"hidden_first": False}, {"tanh": True},
    {"inner": 7, "bounds": "shape", "weights": "uint8"}, {"weights": "fp16", "fp16_bias": True},
    {"linear": "gemm"}, {"linear": "gemm", "weights": "uint8"},
    {"linear": "gemm", "weights": "fp16", "fp16_bias": True},
    {"linear": "gemm", "bounds": "shape", "hidden_first": False}, {"linear": "gemm", "inner": 7, "weights": "fp16"},
])
def test_geglu_feed_forwards_fuse_and_match(tmp_path, monkeypatch, small_blocks, options):
    path, feeds = geglu_model(tmp_path, **options)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert builders.rel_l2(fused, expected) < 1e-5
    assert builders.rel_l2(fused, unfused) < 1e-5


def test_interleaved_columns_fall_back_to_the_original_chain(tmp_path, monkeypatch, small_blocks):
    path, feeds = geglu_model(tmp_path, steps=2)
    count, fused, unfused, expected = run_both(path, feeds, monkeypatch)
    assert count == 1
    assert builders.rel_l2(fused, expected) < 1e-5


@pytest.mark.parametrize("linear", ["matmul", "gemm"])
def test_the_projection_never_exists(tmp_path, monkeypatch, small_blocks, linear):
    """No value as wide as the projection (tokens x 2·inner) is ever in the run's environment."""
    path, feeds = geglu_model(tmp_path, tokens=64, inner=32, bounds="shape", linear=linear)
    widest = []
    with load_model(path) as model:
        model._executor.after_step = lambda i, env: widest.append(
            max(v.shape[-1] for v in env.values() if isinstance(v, np.ndarray) and v.ndim == len(feeds["x"].shape)))
        model.run(feeds)
        ops = [s.node.op_type for s in model.steps]
    assert max(widest) < 64
    assert "GegluFF" in ops and "ShapeOfProduct" in ops and "Slice" not in ops


def test_the_exported_unets_feed_forwards_are_blocked_not_taken_by_the_gelu_fusion():
    """Both rewrites match a transformer's GELU; the GELU fusion (one node, fused Mul) ran first after
    merging the two and left GEGLU nothing to block: SDXL's 168 MB projection came back whole."""
    from pathlib import Path

    pipelines = Path(__file__).parents[1] / "fixtures" / "pipelines"
    for kind, blocks in (("sd15", 4), ("sdxl", 8)):
        with load_model(pipelines / kind / "model" / "unet" / "model.onnx") as model:
            assert model.rewrites["geglu"] == blocks, kind


@pytest.mark.parametrize("pieces", [2, 3, 4])
@pytest.mark.parametrize("options", [{}, {"weights": "uint8"}, {"linear": "gemm", "weights": "fp16"}])
def test_split_over_threads_is_bitwise_the_one_thread_result(tmp_path, monkeypatch, small_blocks, pieces, options):
    """Token rows split into 2-4 shares (11 tokens: uneven shares), every share on its own thread,
    give exactly the one-share result."""
    import threading

    path, feeds = geglu_model(tmp_path, tokens=11, **options)
    with load_model(path) as model:
        monkeypatch.setattr(geglu_kernel, "gemm_pieces", lambda work: 1)
        single = model.run(feeds)["y"]
        names = set()
        original = geglu_kernel._block

        def spy(*args):
            names.add(threading.current_thread().name)
            original(*args)

        monkeypatch.setattr(geglu_kernel, "_block", spy)
        monkeypatch.setattr(geglu_kernel, "gemm_pieces", lambda work: pieces)
        split = model.run(feeds)["y"]
    assert any(name.startswith("frame-ops") for name in names) and len(names) >= 2
    np.testing.assert_array_equal(split, single)
