"""Attention fusion: the exporters' patterns fuse, and sliced == unsliced == onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from frame.engine import load_model
from frame.engine.passes.sliced_attention import AttentionConfig, sliced_attention
from frame.errors import UsageError
from tests.engine import builders


@pytest.mark.parametrize("variant", ["div", "sdpa", "mask"])
@pytest.mark.parametrize("slices", [None, 1, 3, 24, 100])
def test_fused_attention_matches_onnxruntime(tmp_path, variant, slices):
    proto, feeds = builders.attention(variant)
    path = builders.save(proto, tmp_path / "attn.onnx")
    expected = builders.ort_run(path, feeds)["y"]
    with load_model(path, attention_slices=slices) as model:
        assert model.rewrites["attention"] == 1
        assert not [s for s in model.steps if s.node.op_type in ("Softmax", "MatMul")]
        got = model.run(feeds)["y"]
    assert builders.rel_l2(got, expected) < 1e-6


def test_budget_controls_block_size_and_never_builds_full_scores():
    config = AttentionConfig(budget_bytes=24 * 20 * 4 // 4)  # a quarter of one head's scores
    assert config.block(heads=2, n=24, m=20, itemsize=4) == (1, 6)
    config.budget_bytes = 10**9
    assert config.block(heads=2, n=24, m=20, itemsize=4) == (2, 24)  # everything in one block
    config.slices = 4
    assert config.block(heads=2, n=24, m=20, itemsize=4) == (1, 6)

    rng = np.random.default_rng(1)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 50, 8), (2, 3, 8, 40), (2, 3, 40, 8)))
    scale = np.array(0.3, np.float32)
    scores = np.matmul(q, kt) * scale
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    reference = np.matmul(probs / probs.sum(-1, keepdims=True), v)
    seen_blocks = []
    original = np.matmul

    def spy(a, b, **kw):
        result = original(a, b, **kw)
        seen_blocks.append(result.size)
        return result

    np.matmul = spy
    try:
        tiny = AttentionConfig(budget_bytes=40 * 4 * 5)  # five query rows of scores at a time
        got = sliced_attention(q, kt, v, scale, score_ops=("Mul",), _config=tiny)
    finally:
        np.matmul = original
    assert builders.rel_l2(got, reference) < 1e-6
    assert max(seen_blocks) <= 5 * 40  # no score block larger than the budget


def test_mask_per_query_row_is_sliced_with_the_rows():
    rng = np.random.default_rng(2)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 9, 4), (1, 2, 4, 7), (1, 2, 7, 4)))
    mask = rng.standard_normal((1, 1, 9, 7)).astype(np.float32) * 5
    scores = np.matmul(q, kt) + mask
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    reference = np.matmul(probs / probs.sum(-1, keepdims=True), v)
    for slices in (1, 2, 9):
        got = sliced_attention(q, kt, v, mask, score_ops=("Add",), _config=AttentionConfig(slices=slices))
        assert builders.rel_l2(got, reference) < 1e-6


def test_no_fusion_when_scores_are_used_elsewhere(tmp_path):
    proto, feeds = builders.attention("div")
    proto.graph.output.append(builders.value("p", None))  # the probabilities are a graph output too
    path = builders.save(proto, tmp_path / "attn.onnx")
    expected = builders.ort_run(path, feeds)
    with load_model(path) as model:
        assert model.rewrites["attention"] == 0
        got = model.run(feeds)
    for name in ("y", "p"):
        assert builders.rel_l2(got[name], expected[name]) < 1e-6


def test_softmax_on_another_axis_is_not_fused(tmp_path):
    proto, feeds = builders.attention("div")
    softmax = next(n for n in proto.graph.node if n.op_type == "Softmax")
    softmax.attribute[0].CopyFrom(helper.make_attribute("axis", 2))
    path = builders.save(proto, tmp_path / "attn.onnx")
    with load_model(path) as model:
        assert model.rewrites["attention"] == 0
        assert builders.rel_l2(model.run(feeds)["y"], builders.ort_run(path, feeds)["y"]) < 1e-6


def test_set_attention_changes_slicing_of_a_loaded_model(tmp_path):
    proto, feeds = builders.attention("sdpa", n=40, m=40)
    path = builders.save(proto, tmp_path / "attn.onnx")
    with load_model(path) as model:
        first = model.run(feeds)["y"]
        model.set_attention(slices=7)
        assert model.attention.slices == 7
        assert builders.rel_l2(model.run(feeds)["y"], first) < 1e-6
        model.set_attention(slices=None, budget_bytes=256)
        assert model.attention.block(2, 40, 40, 4) == (1, 1)
        assert builders.rel_l2(model.run(feeds)["y"], first) < 1e-6
        with pytest.raises(UsageError):
            model.set_attention(slices=0)
    with pytest.raises(UsageError, match="at least 1"):
        load_model(path, attention_slices=0)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("keys", [7, 300])  # few keys: scores computed transposed; many: by query rows
def test_blocks_transposed_and_split_over_threads_match_the_reference(request, split, keys):
    if split:
        request.getfixturevalue("two_way_splits")
    rng = np.random.default_rng(4)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 70, 8), (2, 3, 8, keys), (2, 3, keys, 8)))
    scale = np.array(0.4, np.float32)
    scores = np.matmul(q.astype(np.float64), kt) * 0.4
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    reference = np.matmul(probs / probs.sum(-1, keepdims=True), v)
    for budget in (16 << 20, 4 * keys * 9):  # one block; blocks of a few query rows
        got = sliced_attention(q, kt, v, scale, score_ops=("Mul",), _config=AttentionConfig(budget_bytes=budget))
        assert builders.rel_l2(got, reference) < 1e-6


def test_threads_share_the_budget():
    config = AttentionConfig(budget_bytes=8 << 20)
    assert config.block(heads=8, n=4096, m=4096, itemsize=4, threads=1) == (1, 256)  # capped at BLOCK_BYTES
    assert config.block(heads=8, n=4096, m=4096, itemsize=4, threads=4) == (1, 128)  # 4 × 2 MB
