"""Concept-axis features and candidate/rating plumbing."""

import numpy as np
import pytest

from frame.errors import FrameError
from frame.taste.features import DEFAULT_AXES, Candidate, PromptFeatures
from frame.taste.ratings import Rating, rating_class

from .owners import hashed_bag_of_words


class CountingEmbed:
    def __init__(self):
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return hashed_bag_of_words(texts)


def test_axis_value_sign_follows_the_pole_descriptions():
    features = PromptFeatures(hashed_bag_of_words)
    low, high = DEFAULT_AXES["warmth"]
    values = features.axis_values([high, low, "warm golden light"])
    warmth = list(features.axes).index("warmth")
    assert values[0, warmth] > 0.5 and values[1, warmth] < -0.5 and values[2, warmth] > 0


def test_embeddings_are_cached_by_text():
    embed = CountingEmbed()
    features = PromptFeatures(embed, {"sea": ("dry desert", "the open sea")})
    features.axis_values(["sea at night", "desert"])
    features.axis_values(["sea at night", "new text"])
    assert embed.calls[1:] == [["new text"]]
    assert sorted(embed.calls[0]) == sorted(["dry desert", "the open sea", "sea at night", "desert"])


@pytest.mark.parametrize(
    "embed, message",
    [
        (lambda texts: np.zeros(len(texts)), "2-D"),
        (lambda texts: np.full((len(texts), 4), np.nan), "NaN"),
        (lambda texts: np.ones((len(texts) + 1, 4)), "rows for"),
    ],
)
def test_bad_embedder_output_is_named(embed, message):
    with pytest.raises(FrameError, match=message):
        PromptFeatures(embed).axis_values(["a prompt"])


@pytest.mark.parametrize("axes", [{"x": ["only one"]}, {"x": "not a pair"}, {"x": ["", "b"]}, {}])
def test_bad_axes_config_is_named(axes):
    with pytest.raises(FrameError, match="taste.axes"):
        PromptFeatures(hashed_bag_of_words, axes)


def test_candidate_text_and_round_trip():
    c = Candidate(theme="quiet lake", style="oil painting", params={"steps": 4}, popularity=3)
    assert c.text == "quiet lake, oil painting"
    assert Candidate.from_dict(c.to_dict()) == Candidate(
        theme="quiet lake",
        style="oil painting",
        prompt="quiet lake, oil painting",
        params={"steps": 4.0},
        popularity=3.0,
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, "liked"),
        (False, "disliked"),
        ("Like", "liked"),
        ("dislike", "disliked"),
        (5, "liked"),
        (4, "liked"),
        (3, "neutral"),
        (2, "disliked"),
        (1, "disliked"),
        (4.0, "liked"),
    ],
)
def test_rating_classes(value, expected):
    assert rating_class(value) == expected


@pytest.mark.parametrize("value", [0, 6, 3.5, "great", None])
def test_bad_ratings_are_rejected_when_recorded(value):
    with pytest.raises(FrameError, match="1–5 stars"):
        Rating(Candidate(theme="x"), value)


def test_rating_round_trip_through_json():
    import json

    rating = Rating(Candidate(theme="quiet lake", params={"steps": 4}), 4, picture_id="2026-11-29")
    assert Rating.from_dict(json.loads(json.dumps(rating.to_dict()))).to_dict() == rating.to_dict()
