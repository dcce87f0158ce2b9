"""Simulated owners and a deterministic fake text encoder for the picker tests.

The fake encoder is a hashed bag of words (a word's bucket and sign come from crc32), so prompts
sharing words with an axis description move along that axis — enough structure for the picker to
learn from, with no model download.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from frame.taste.features import Candidate, PromptFeatures

DIM = 512

THEMES = (
    "golden autumn forest",
    "stormy sea at night",
    "quiet mountain lake",
    "neon city street at night",
    "busy market in the city",
    "calm beach at sunrise",
    "snowy blue mountains",
    "red desert canyon",
    "moonlight over a quiet village",
    "crowded harbour with boats",
    "orange sunset over fields",
    "misty forest in teal light",
    "intricate cathedral interior",
    "minimal empty room",
    "thunderstorm over the city",
    "peaceful garden with flowers",
)
STYLES = (
    "realistic detailed photograph",
    "watercolour painting with visible brush strokes",
    "oil painting",
    "minimal flat illustration",
    "pencil sketch",
    "cinematic photograph",
)


def hashed_bag_of_words(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), DIM))
    for row, text in enumerate(texts):
        for word in re.findall(r"[a-z]+", text.lower()):
            h = zlib.crc32(word.encode())
            out[row, h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
    return out


class Owner:
    """Hidden taste: a linear preference over the true axis positions of a prompt; likes the top
    ``share`` of the pool and flips a verdict with probability ``noise`` (seeded)."""

    def __init__(
        self,
        weights: dict[str, float],
        pool: list[Candidate],
        share: float = 0.3,
        noise: float = 0.0,
        seed: int = 0,
    ) -> None:
        self._features = PromptFeatures(hashed_bag_of_words)
        self._weights = np.array([weights.get(a, 0.0) for a in self._features.axes])
        self._threshold = np.quantile(self._utility(pool), 1.0 - share)
        self._noise = noise
        self._rng = np.random.default_rng(seed)
        self.base_rate = float(np.mean([self.truly_likes(c) for c in pool]))

    def _utility(self, candidates: list[Candidate]) -> np.ndarray:
        return self._features.axis_values([c.text for c in candidates]) @ self._weights

    def truly_likes(self, candidate: Candidate) -> bool:
        return bool(self._utility([candidate])[0] > self._threshold)

    def rate(self, candidate: Candidate) -> bool:
        verdict = self.truly_likes(candidate)
        return (not verdict) if self._rng.random() < self._noise else verdict
