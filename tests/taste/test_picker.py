"""ThemePicker: cold start, exploration, recency, explanations, and learning simulated owners."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

from frame.errors import FrameError
from frame.taste.features import Candidate
from frame.taste.picker import TasteSettings, ThemePicker
from frame.taste.ratings import Rating

from .owners import STYLES, THEMES, Owner, hashed_bag_of_words


@dataclass
class FeedItem:  # shaped like a prompt-feed entry; the picker must not import the daemon's class
    title: str
    prompt: str
    popularity: float
    source: str = "lexica"


def picker(**settings):
    return ThemePicker(hashed_bag_of_words, TasteSettings(themes=THEMES, styles=STYLES, **settings))


def simulate(p, owner, nights=60, seed=0):
    rng = np.random.default_rng(seed)
    pool = p.candidates()
    ratings, recent, liked, choices = [], [], [], []
    for night in range(nights):
        choice = p.pick(pool, ratings, recent, rng=rng)
        liked.append(owner.truly_likes(choice.candidate))
        ratings.append(Rating(choice.candidate, owner.rate(choice.candidate), picture_id=f"night-{night}"))
        recent.append(choice.candidate.theme)
        choices.append(choice)
    return np.array(liked), choices


@pytest.mark.parametrize(
    "weights, seed",
    [({"warmth": 1, "urban": -1}, 0), ({"realism": 1, "drama": 1}, 1), ({"detail": -1, "warmth": -1}, 2)],
)
def test_learns_a_hidden_taste_within_60_nights(weights, seed):
    p = picker()
    owner = Owner(weights, p.candidates(), share=0.3, noise=0.1, seed=seed)
    liked, choices = simulate(p, owner, seed=seed)
    assert owner.base_rate == pytest.approx(0.3, abs=0.02)  # what choosing at random would give
    assert liked.mean() >= owner.base_rate + 0.25
    assert liked[30:].mean() >= owner.base_rate + 0.3
    modes = [c.mode for c in choices]
    assert modes[:10] == ["variety"] * 10
    assert 3 <= modes.count("explore") <= 20  # explore_rate 0.2 of the 50 learning nights
    for night, choice in enumerate(choices):
        recent = {c.candidate.theme for c in choices[max(0, night - 5) : night]}
        assert choice.candidate.theme not in recent


def test_model_choice_carries_a_json_explanation():
    p = picker(explore_rate=0.0)
    owner = Owner({"warmth": 1}, p.candidates(), seed=3)
    _, choices = simulate(p, owner, nights=25, seed=3)
    choice = choices[-1]
    assert choice.mode == "model"
    data = json.loads(json.dumps(choice.to_dict()))
    space = data["explanation"]["subspaces"][0]
    assert set(space) >= {"features", "score", "weight", "neighbours", "vote", "contribution", "summary"}
    assert space["neighbours"][0]["row_id"].startswith("night-")
    assert space["neighbours"][0]["theme"] in THEMES
    assert "of your 8 most similar rated pictures were" in data["reason"]
    assert data["explanation"]["search"] in {"product", "faithful"}  # which search the model chose
    assert data["candidate"]["theme"] == choice.candidate.theme
    assert Candidate.from_dict(data["candidate"]).text == choice.candidate.text


def test_cold_start_prefers_unseen_themes_then_feed_popularity():
    p = picker()
    feed = [FeedItem("aurora", "aurora over a frozen lake", 50.0), FeedItem("koi", "koi pond", 5.0)]
    pool = p.candidates(feed)
    assert len(pool) == len(THEMES) * len(STYLES) + 2
    rng = np.random.default_rng(0)
    first = p.pick(pool, [], [], rng=rng)
    assert first.mode == "variety" and first.candidate.prompt == "aurora over a frozen lake"
    assert first.candidate.source == "lexica"
    ratings = [Rating(c, True) for c in pool[:3]]
    second = p.pick(pool, ratings, ["aurora"], rng=rng)
    assert second.candidate.theme not in {"aurora", THEMES[0]}
    assert "3 of 10 ratings" in second.reason
    json.dumps(second.to_dict())


def test_one_kind_of_verdict_falls_back_to_variety():
    p = picker()
    pool = p.candidates()
    ratings = [Rating(c, 5) for c in pool[:12]]
    choice = p.pick(pool, ratings, [], rng=np.random.default_rng(0))
    assert choice.mode == "variety" and "same" in choice.reason


def test_exploration_rate_is_respected():
    p_always, p_never = picker(explore_rate=1.0, min_ratings=4), picker(explore_rate=0.0, min_ratings=4)
    pool = p_always.candidates()
    ratings = [Rating(c, i % 2 == 0) for i, c in enumerate(pool[:: len(STYLES)][:8])]
    rng = np.random.default_rng(1)
    explored = [p_always.pick(pool, ratings, rng=rng) for _ in range(5)]
    assert {c.mode for c in explored} == {"explore"}
    rated = {r.candidate.theme for r in ratings}
    assert all(c.candidate.theme not in rated for c in explored)  # least-rated themes first
    assert {p_never.pick(pool, ratings, rng=rng).mode for _ in range(5)} == {"model"}


def test_star_ratings_with_neutral_class_and_parameters_as_features():
    p = ThemePicker(hashed_bag_of_words, TasteSettings(themes=THEMES, explore_rate=0.0, min_ratings=6))
    pool = [Candidate(theme=t, params={"steps": s, "guidance": 7.0}) for t in THEMES for s in (2, 4)]
    stars = [5, 4, 3, 1, 2, 5, 3, 4, 1, 5, 2, 3]
    ratings = [Rating(c, s, picture_id=i) for i, (c, s) in enumerate(zip(pool[::2], stars))]
    model, names, params = p.fit(ratings, pool)
    assert set(model.classes_) == {"liked", "neutral", "disliked"}
    assert params == ["guidance", "steps"] and names[-2:] == ["guidance", "steps"]
    choice = p.pick(pool, ratings, rng=np.random.default_rng(0))
    assert choice.mode == "model" and 0.0 <= choice.score <= 1.0


def test_every_theme_recent_allows_repeats():
    p = ThemePicker(hashed_bag_of_words, TasteSettings(themes=("a", "b"), avoid_recent=5))
    choice = p.pick(p.candidates(), [], ["a", "b"], rng=np.random.default_rng(0))
    assert choice.candidate.theme in {"a", "b"}


def test_settings_validation_and_config_adapter():
    with pytest.raises(FrameError, match="taste.explore_rate"):
        TasteSettings(explore_rate=1.5)
    with pytest.raises(FrameError, match="taste.n_neighbors"):
        TasteSettings(n_neighbors=0)
    settings = TasteSettings.from_config({"themes": ["x"], "explore_rate": 0.1, "axes": None})
    assert settings.themes == ("x",) and settings.explore_rate == 0.1 and settings.min_ratings == 10
    with pytest.raises(FrameError, match="no candidates"):
        ThemePicker(hashed_bag_of_words).candidates()
    with pytest.raises(FrameError, match="feed item"):
        ThemePicker(hashed_bag_of_words).candidates([{"popularity": 3}])


def test_same_seed_same_nights():
    p = picker()
    owner_a = Owner({"drama": 1}, p.candidates(), noise=0.1, seed=5)
    owner_b = Owner({"drama": 1}, p.candidates(), noise=0.1, seed=5)
    _, a = simulate(p, owner_a, nights=20, seed=5)
    _, b = simulate(picker(), owner_b, nights=20, seed=5)
    assert [c.to_dict() for c in a] == [c.to_dict() for c in b]


def test_plot_choice_writes_a_png(tmp_path):
    p = picker()
    pool = p.candidates()
    ratings = [Rating(c, i % 3 == 0, picture_id=i) for i, c in enumerate(pool[::7])]
    out = p.plot_choice(pool[1], ratings, tmp_path / "why.png", max_panels=2)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reselect_schedule_is_geometric():
    from frame.taste.picker import reselect

    assert not reselect(40, 40) and not reselect(40, 49)
    assert reselect(40, 50) and reselect(40, 39)  # grew by a quarter, or ratings were removed
    counts, chosen_at = [], 10
    for n in range(10, 61):
        if reselect(chosen_at, n) or n == 10:
            counts.append(n)
            chosen_at = n
    assert counts == [10, 13, 17, 22, 28, 35, 44, 55]


def test_fit_reuses_the_model_and_the_mode_choice(monkeypatch):
    from frame.taste import classifier

    p = picker()
    owner = Owner({"warmth": 1}, p.candidates(), seed=4)
    ratings = [Rating(c, owner.rate(c), picture_id=f"r{i}") for i, c in enumerate(p.candidates()[:30])]
    choices = []
    real = classifier.IKNNClassifier._selection_scores

    def counting(self, X, y):
        scores = real(self, X, y)
        choices.append(len(y)) if scores else None
        return scores

    monkeypatch.setattr(classifier.IKNNClassifier, "_selection_scores", counting)
    model, _, _ = p.fit(ratings[:20])
    assert p.fit(ratings[:20])[0] is model  # same ratings (pick, then plot): the same fitted model
    chosen = model.mode_
    later = p.fit(ratings[:24])[0]  # 24 < 20 × 1.25: the remembered mode, fitted directly
    assert later.mode_ == chosen and later.selection_scores_ == {}
    assert p.fit(ratings[:25])[0].selection_scores_  # grew by a quarter: chosen again
    assert choices == [20, 25]


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
@pytest.mark.parametrize("ratings", [0, 12])
def test_a_feed_prompt_with_a_non_finite_weight_is_skipped_and_named(bad, ratings, caplog):
    """A feed weighted 1e308 whose item weighed 100 gave popularity inf; the variety score became
    inf/inf = nan everywhere and every night failed in _argmax_random ("a cannot be empty")."""
    p = picker(explore_rate=0.0)
    broken = Candidate(theme="a broken feed prompt", prompt="a broken feed prompt", source="feed:x", popularity=bad)
    good = Candidate(theme="a fine feed prompt", prompt="a fine feed prompt", source="feed:y", popularity=3.0)
    pool = p.candidates() + [broken, good]
    history = [Rating(c, i % 2 == 0, picture_id=i) for i, c in enumerate(p.candidates()[:ratings])]
    choice = p.pick(pool, history, rng=np.random.default_rng(0))
    assert choice.candidate != broken
    assert choice.explanation["skipped"] == ["a broken feed prompt (feed:x): popularity is not a finite number"]
    assert "a broken feed prompt" in caplog.text
    json.dumps(choice.to_dict(), allow_nan=False)  # the stored explanation stays plain JSON


def test_only_non_finite_candidates_is_a_clear_error():
    p = ThemePicker(hashed_bag_of_words, TasteSettings())
    only = Candidate(theme="x", prompt="x", source="feed:x", popularity=float("inf"))
    with pytest.raises(FrameError, match="not a finite number"):
        p.pick([only], rng=np.random.default_rng(0))
