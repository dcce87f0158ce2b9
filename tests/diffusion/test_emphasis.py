"""A1111 emphasis syntax and the scale-then-restore-mean weighting."""

from __future__ import annotations

import numpy as np
import pytest

from frame.diffusion.emphasis import apply_token_weights, parse_emphasis, weighted_tokens

R, S = 1.1, 1 / 1.1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("normal text", [("normal text", 1.0)]),
        ("an (important) word", [("an ", 1.0), ("important", R), (" word", 1.0)]),
        ("(unbalanced", [("unbalanced", R)]),
        ("\\(literal\\]", [("(literal]", 1.0)]),
        ("\\\\ backslash", [("\\ backslash", 1.0)]),
        ("lone \\n backslash", [("lone n backslash", 1.0)]),
        ("(unnecessary)(parens)", [("unnecessaryparens", R)]),
        ("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).",
         # the example from A1111's documentation, with its published weights
         [("a ", 1.0), ("house", 1.573), (" ", 1.1), ("on", 1.0), (" a ", 1.1), ("hill", 0.55),
          (", sun, ", 1.1), ("sky", 1.4641), (".", 1.1)]),
        ("[double [square]]", [("double ", S), ("square", S * S)]),
        ("(a:1.5) closing ) extra ]", [("a", 1.5), (" closing ) extra ]", 1.0)]),
        ("time 10:30 and ratio 16:9", [("time 10:30 and ratio 16:9", 1.0)]),
        ("(bad:1.2.3)", [("bad:1.2.3", R)]),
        ("(neg:-1)", [("neg", -1.0)]),
        ("( spaced : 2 )", [(" spaced ", 2.0)]),
        ("", [("", 1.0)]),
        ("()", [("", 1.0)]),
    ],
)
def test_parse_emphasis(text, expected):
    got = parse_emphasis(text)
    assert [f for f, _ in got] == [f for f, _ in expected]
    np.testing.assert_allclose([w for _, w in got], [w for _, w in expected], rtol=1e-9)


class _WordTokenizer:
    """One token per whitespace-separated word, enough to check how weights line up with ids."""

    max_length = 8

    def encode(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]

    def frame_ids(self, ids: list[int]) -> tuple[list[int], bool]:
        room = self.max_length - 2
        row = [100, *ids[:room], 101]
        return row + [102] * (self.max_length - len(row)), len(ids) > room


def test_weighted_tokens_line_up_with_ids():
    row, weights, truncated = weighted_tokens(_WordTokenizer(), "a (bb:2) ccc [dddd]")
    assert row == [100, 1, 2, 3, 4, 101, 102, 102]
    np.testing.assert_allclose(weights, [1, 1, 2, 1, S, 1, 1, 1], rtol=1e-6)
    assert not truncated


def test_weighted_tokens_truncate_weights_with_ids():
    row, weights, truncated = weighted_tokens(_WordTokenizer(), "a b c d e (f g h:3)")
    assert truncated
    assert row == [100, 1, 1, 1, 1, 1, 1, 101]
    np.testing.assert_allclose(weights, [1, 1, 1, 1, 1, 1, 3, 1])


def test_apply_token_weights_scales_then_restores_mean():
    rng = np.random.default_rng(0)
    hidden = rng.normal(0.5, 1.0, size=(1, 5, 4)).astype(np.float32)
    weights = np.array([1, 1.5, 1, 0.5, 1], dtype=np.float32)
    out = apply_token_weights(hidden, weights)
    assert out.dtype == np.float32
    assert out.mean() == pytest.approx(hidden.mean(), rel=1e-5)
    scaled = hidden * weights[None, :, None]
    np.testing.assert_allclose(out, scaled * (hidden.mean() / scaled.mean()), rtol=1e-5)


def test_apply_token_weights_unweighted_is_identity():
    hidden = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    assert apply_token_weights(hidden, np.ones(3, dtype=np.float32)) is hidden
