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


def _reference_attention(q, kt, v, mask=None):
    scores = np.matmul(q.astype(np.float64), kt.astype(np.float64))
    if mask is not None:
        scores = scores + mask
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    return np.matmul(probs / probs.sum(-1, keepdims=True), v.astype(np.float64))


@pytest.mark.parametrize("offset", [-300.0, -70.0, -59.0, 0.0, 59.0, 70.0, 300.0])
@pytest.mark.parametrize("keys", [40, 300])  # transposed blocks (few keys) and row blocks
@pytest.mark.parametrize("v_scale", [1.0, 1e35])
def test_softmax_is_exact_at_every_score_range(offset, keys, v_scale):
    """Scores whose row maxima sit anywhere (far below, inside and beyond the unshifted exp's safe
    range) and values near float32's limit give softmax(s) @ v: the shift is skipped only where exp(s),
    its sums and Σexp(s)·v stay finite and the terms that matter stay normal floats."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 37, 16)).astype(np.float32)
    kt = rng.standard_normal((2, 16, keys)).astype(np.float32) * 0.5
    v = (rng.standard_normal((2, keys, 16)) * v_scale).astype(np.float32)
    # a whole-row offset of the scores: a bias the scale fold leaves alone (a scalar Add)
    bias = np.array(offset, np.float32)
    got = sliced_attention(q, kt, v, bias, score_ops=("Add",))
    expected = _reference_attention(q, kt, v, float(offset))
    assert np.isfinite(got).all()
    assert builders.rel_l2(got, expected) < 1e-5
    got = sliced_attention(q * np.float32(1 + abs(offset) / 10), kt, v)  # large scale: large row maxima
    expected = _reference_attention(q * np.float32(1 + abs(offset) / 10), kt, v)
    assert np.isfinite(got).all()
    assert builders.rel_l2(got, expected) < 1e-5


def test_typical_scores_skip_the_shift(monkeypatch):
    """Scores of trained-model size (|row max| well under 60) take exp(s) unshifted: the subtraction
    pass over the score block is what this saves."""
    from frame.engine.passes import sliced_attention as module

    answers = []
    real = module._shift_needed
    monkeypatch.setattr(module, "_shift_needed", lambda peak, limit: answers.append(real(peak, limit)) or answers[-1])
    rng = np.random.default_rng(3)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 64, 8), (1, 2, 8, 512), (1, 2, 512, 8)))
    sliced_attention(q, kt, v, np.array(0.35, np.float32), score_ops=("Mul",))
    assert answers and not any(answers)
    answers.clear()
    sliced_attention(q * 40, kt, v)  # row maxima far beyond the safe range: shifted
    assert answers and all(answers)


def test_unshifted_limit_shrinks_with_many_keys_and_large_values():
    from frame.engine.passes.sliced_attention import SAFE_SCORE, unshifted_limit

    assert unshifted_limit(4096, np.ones(3, np.float32)) == SAFE_SCORE
    assert unshifted_limit(4096, np.full(3, 1e30, np.float32)) < 10
    assert unshifted_limit(4096, np.full(3, 1e36, np.float32)) == 0.0
    assert unshifted_limit(77, np.array([np.nan], np.float32)) == 0.0
