"""A1111-style prompt emphasis: ``(word:1.3)``, ``(word)`` ×1.1, ``[word]`` ÷1.1, with escapes and nesting.

People copy prompts from AUTOMATIC1111's web UI, so frame reads its emphasis syntax with the same
meaning:

* ``(text)`` multiplies the weight of ``text`` by 1.1, ``[text]`` divides it by 1.1, ``(text:w)``
  multiplies it by ``w``; brackets nest and multiply; an unclosed bracket applies to the rest of the prompt;
  a closing bracket without its opener is ordinary text.
* ``\\(`` ``\\)`` ``\\[`` ``\\]`` ``\\\\`` are literal characters; any other lone backslash is dropped.
* Adjacent fragments with equal weights are joined before tokenising, so a prompt without brackets is
  tokenised as one string (identical to diffusers).

Two deliberate differences: ``BREAK`` is ordinary text (frame encodes one 77-token chunk; longer prompts
are truncated with a warning), and a malformed weight such as ``(a:1.2.3)`` is kept as text instead of
crashing (``:`` and the digits stay text, ``)`` closes the bracket).

Weights are applied to the text encoder's hidden states the A1111 way (:func:`apply_token_weights`):
multiply each token's vector, then rescale the whole tensor so its mean is what it was.
"""

from __future__ import annotations

import re

import numpy as np

ROUND = 1.1
SQUARE = 1 / 1.1

# Order matters (leftmost-first alternation): escapes, brackets, an explicit weight closing a round
# bracket, closers, plain text, and a lone colon.
_TOKEN = re.compile(
    r"""
    \\[()\[\]\\]            # escaped bracket or backslash
    | \\                    # any other backslash (dropped)
    | [(\[]                 # opening bracket
    | :\s*(?P<weight>[+-]?(?:\d+\.?\d*|\.\d+))\s*\)   # ':1.3)' closes a round bracket with a weight
    | [)\]]                 # closing bracket
    | [^\\()\[\]:]+         # plain text
    | :                     # a colon that is not a weight
    """,
    re.VERBOSE,
)


def parse_emphasis(text: str) -> list[tuple[str, float]]:
    """Split ``text`` into (fragment, weight) pairs; brackets and weight markers are removed.

    >>> parse_emphasis("a (red:1.5) [old] car")
    [('a ', 1.0), ('red', 1.5), (' ', 1.0), ('old', 0.9090909090909091), (' car', 1.0)]
    """
    parts: list[list] = []  # [fragment, weight] pairs, mutated as brackets close
    rounds: list[int] = []
    squares: list[int] = []

    def scale_from(start: int, factor: float) -> None:
        for part in parts[start:]:
            part[1] *= factor

    for match in _TOKEN.finditer(text):
        token, weight = match.group(0), match.group("weight")
        if token.startswith("\\"):
            parts.append([token[1:], 1.0])
        elif token == "(":
            rounds.append(len(parts))
        elif token == "[":
            squares.append(len(parts))
        elif weight is not None and rounds:
            scale_from(rounds.pop(), float(weight))
        elif token == ")" and rounds:
            scale_from(rounds.pop(), ROUND)
        elif token == "]" and squares:
            scale_from(squares.pop(), SQUARE)
        else:
            parts.append([token, 1.0])
    for start in rounds:
        scale_from(start, ROUND)
    for start in squares:
        scale_from(start, SQUARE)
    return _merge_equal(parts)


def _merge_equal(parts: list[list]) -> list[tuple[str, float]]:
    merged: list[tuple[str, float]] = []
    for fragment, weight in parts:
        if merged and merged[-1][1] == weight:
            merged[-1] = (merged[-1][0] + fragment, weight)
        else:
            merged.append((fragment, weight))
    return merged or [("", 1.0)]


def weighted_tokens(tokenizer, text: str) -> tuple[list[int], np.ndarray, bool]:
    """Token row and per-token weights for ``text``.

    Returns ``(ids, weights, truncated)``: ``ids`` is the padded ``max_length`` row the text encoder takes,
    ``weights`` a float32 vector of the same length (1.0 for start, end and padding tokens), and
    ``truncated`` whether text tokens beyond ``max_length - 2`` were dropped.
    """
    ids: list[int] = []
    token_weights: list[float] = []
    for fragment, weight in parse_emphasis(text):
        fragment_ids = tokenizer.encode(fragment)
        ids += fragment_ids
        token_weights += [weight] * len(fragment_ids)
    row, truncated = tokenizer.frame_ids(ids)
    weights = np.ones(len(row), dtype=np.float32)
    kept = token_weights[: len(row) - 2]
    weights[1 : 1 + len(kept)] = kept
    return row, weights, truncated


def apply_token_weights(hidden: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Scale each token's vector by its weight, then restore the tensor's original mean (A1111).

    ``hidden`` is (batch, tokens, channels); ``weights`` is (tokens,). All-ones weights return ``hidden``
    unchanged (bit-for-bit), so unweighted prompts match diffusers exactly.
    """
    if np.all(weights == 1.0):
        return hidden
    original_mean = hidden.mean(dtype=np.float64)
    scaled = hidden * weights[None, :, None].astype(hidden.dtype)
    new_mean = scaled.mean(dtype=np.float64)
    return (scaled * (original_mean / new_mean)).astype(hidden.dtype)
