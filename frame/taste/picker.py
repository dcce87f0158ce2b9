"""ThemePicker: choose tonight's prompt from config themes × styles and feed items, and say why.

Nightly flow (the daemon owns storage and feeds; this module only computes):

1. ``pool = picker.candidates(feed_items)`` — config themes × styles plus feed items.
2. ``choice = picker.pick(pool, ratings, recent_themes, rng=...)`` — ratings are the owner's past
   verdicts (:class:`Rating`), ``recent_themes`` the themes of the last nights, newest last.
3. Store ``choice.to_dict()`` with the picture; when the owner rates it, keep
   ``Rating(Candidate.from_dict(stored["candidate"]), value, picture_id)`` for the next nights.

With fewer than ``min_ratings`` ratings, or only one kind of verdict, the choice favours variety and
feed popularity. Afterwards an :class:`IKNNClassifier` trained on the ratings scores every candidate
by expected liking; with probability ``explore_rate`` a less-tried theme is taken instead so the model
keeps learning. Themes of the last ``avoid_recent`` nights are skipped.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from frame.errors import FrameError
from frame.taste.features import Candidate, Embed, PromptFeatures
from frame.taste.ratings import UTILITY, Rating, rating_class

log = logging.getLogger(__name__)

SENTENCE = "on {space}, {count} of your {k} most similar rated pictures were {label}"


@dataclass(frozen=True)
class TasteSettings:
    """The ``taste`` section of config.yaml (plain values; see docs/iknn.md, "Theme picker")."""

    themes: tuple[str, ...] = ()
    styles: tuple[str, ...] = ()
    explore_rate: float = 0.2
    min_ratings: int = 10
    avoid_recent: int = 5
    n_neighbors: int = 8
    axes: Mapping[str, Sequence[str]] | None = None  # None → features.DEFAULT_AXES

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 <= self.explore_rate <= 1.0:
            problems.append(f"taste.explore_rate: must be between 0 and 1, got {self.explore_rate!r}")
        for name in ("min_ratings", "avoid_recent"):
            if int(getattr(self, name)) < 0:
                problems.append(f"taste.{name}: must be >= 0, got {getattr(self, name)!r}")
        if int(self.n_neighbors) < 1:
            problems.append(f"taste.n_neighbors: must be >= 1, got {self.n_neighbors!r}")
        if problems:
            raise FrameError("; ".join(problems))

    @classmethod
    def from_config(cls, section: Any) -> TasteSettings:
        """Build from any object (or mapping) with the ``taste`` keys; missing keys keep defaults."""
        get = section.get if isinstance(section, Mapping) else (lambda k, d=None: getattr(section, k, d))
        values = {k: get(k) for k in cls.__dataclass_fields__ if get(k) is not None}
        for key in ("themes", "styles"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)


@dataclass(frozen=True)
class Choice:
    """Tonight's pick. ``mode`` is "model", "explore" or "variety"; ``explanation`` is plain JSON."""

    candidate: Candidate
    mode: str
    score: float | None
    reason: str
    explanation: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "candidate": self.candidate.to_dict(),
            "mode": self.mode,
            "score": self.score,
            "reason": self.reason,
            "explanation": self.explanation,
        }


def _field(item: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
        if value not in (None, ""):
            return value
    return default


def candidate_from_item(item: Any, params: Mapping[str, float] | None = None) -> Candidate:
    """Adapt a feed item (any dataclass/object/mapping with ``prompt``/``text`` and/or
    ``theme``/``title``, optional ``style``, ``popularity``/``score``, ``source``/``feed``)."""
    prompt = str(_field(item, "prompt", "text", default=""))
    theme = str(_field(item, "theme", "title", default=prompt))
    if not theme.strip():
        raise FrameError(f"feed item has no prompt, text, theme or title: {item!r}")
    popularity = float(_field(item, "popularity", "score", "votes", default=0.0))
    return Candidate(
        theme=theme,
        style=str(_field(item, "style", default="")),
        prompt=prompt,
        source=str(_field(item, "source", "feed", default="feed")),
        params=dict(params or {}),
        popularity=max(popularity, 0.0),
    )


class ThemePicker:
    """Learns the owner's taste from ratings and picks tonight's candidate (see module docstring)."""

    def __init__(self, embed: Embed, settings: TasteSettings | None = None) -> None:
        self.settings = settings or TasteSettings()
        self.features = PromptFeatures(embed, self.settings.axes)
        self._last_fit: tuple[tuple, tuple] | None = None  # (data key, fit result)
        self._selection: tuple[int, str] | None = None  # (ratings when chosen, chosen mode)

    def candidates(
        self, feed_items: Iterable[Any] = (), params: Mapping[str, float] | None = None
    ) -> list[Candidate]:
        """Config themes × styles (theme alone when no styles) followed by the feed items."""
        styles = self.settings.styles or ("",)
        pool = [
            Candidate(theme=t, style=s, params=dict(params or {}))
            for t in self.settings.themes
            for s in styles
        ]
        pool += [candidate_from_item(item, params) for item in feed_items]
        if not pool:
            raise FrameError(
                "taste: no candidates — set taste.themes in config.yaml or configure a prompt feed"
            )
        return pool

    def pick(
        self,
        candidates: Sequence[Candidate],
        ratings: Sequence[Rating] = (),
        recent_themes: Sequence[str] = (),
        *,
        rng: np.random.Generator | None = None,
    ) -> Choice:
        """Choose one candidate; ``rng`` makes exploration and tie-breaks reproducible."""
        if not candidates:
            raise FrameError("taste: no candidates to choose from")
        rng = rng if rng is not None else np.random.default_rng()
        usable, skipped = finite_candidates(candidates)
        choice = self._choose(self._fresh(usable, recent_themes), ratings, recent_themes, rng)
        if skipped:
            choice = replace(choice, explanation={**choice.explanation, "skipped": skipped})
        return choice

    def _choose(self, pool, ratings, recent_themes, rng) -> Choice:
        """Variety before the model has enough ratings; then exploration or the best expected liking."""
        if not self.uses_model(ratings):
            why = (
                f"only {len(ratings)} of {self.settings.min_ratings} ratings so far"
                if len(ratings) < self.settings.min_ratings
                else "every rating so far is the same"
            )
            return self._variety(pool, ratings, recent_themes, rng, why)
        model, names, params = self.fit(ratings, pool)
        values = self._matrix(pool, params)
        utility = self._utility(model, values)
        if rng.random() < self.settings.explore_rate:
            return self._explore(pool, ratings, utility, rng)
        best = _argmax_random(utility, rng)
        return self._explained(model, names, pool[best], values[best], utility[best], ratings)

    def uses_model(self, ratings: Sequence[Rating]) -> bool:
        """Whether :meth:`pick` trains the taste model (scikit-learn) on these ratings: at least
        ``min_ratings`` of them, of at least two kinds. Otherwise it chooses for variety, numpy only."""
        classes = {rating_class(r.value) for r in ratings}
        return len(ratings) >= self.settings.min_ratings and len(classes) >= 2

    # --- model ----------------------------------------------------------------------------------

    def fit(self, ratings: Sequence[Rating], pool: Sequence[Candidate] = ()):
        """Train the taste model; returns ``(classifier, feature names, parameter columns)``.

        The same ratings give the same model object back (a night fits once to pick and again to
        plot). The classifier's per-data-set choice between its own search and the original's is
        the expensive part of a fit (ten inner fits), so this picker re-runs it only once the
        ratings have grown by a quarter since the last choice (see :func:`reselect`); in between
        it fits the chosen mode directly.
        """
        rated = [r.candidate for r in ratings]
        params = _shared_params(list(rated) + list(pool), set(self.features.axes))
        names = list(self.features.axes) + params
        ids = [r.picture_id if r.picture_id is not None else f"rating-{i}" for i, r in enumerate(ratings)]
        labels = np.array([rating_class(r.value) for r in ratings])
        X = self._matrix(rated, params)
        key = (X.shape, X.tobytes(), tuple(labels.tolist()), tuple(ids), tuple(names))
        if self._last_fit is not None and self._last_fit[0] == key:
            return self._last_fit[1]
        model = self._model(len(ratings)).fit(X, labels, feature_names=names, sample_ids=ids)
        if model.selection_scores_:
            self._selection = (len(ratings), model.mode_)
        self._last_fit = (key, (model, names, params))
        return model, names, params

    def _model(self, n_ratings: int):
        """A fresh classifier that chooses its mode by inner CV, or fits the remembered choice."""
        from frame.taste.classifier import IKNNClassifier

        model = IKNNClassifier(n_neighbors=self.settings.n_neighbors)
        if self._selection is not None and not reselect(self._selection[0], n_ratings):
            model.set_params(select_by_cv=False, faithful=self._selection[1] == "faithful")
        return model

    def plot_choice(self, candidate: Candidate, ratings: Sequence[Rating], path, **kwargs):
        """Write a PNG of why ``candidate`` scores as it does: the taste model's voting pairs with the
        rated pictures and the candidate as a star (see ``IKNNClassifier.plot_prediction``)."""
        model, _, params = self.fit(ratings, [candidate])
        return model.plot_prediction(self._matrix([candidate], params), path, **kwargs)

    def _matrix(self, candidates: Sequence[Candidate], params: list[str]) -> np.ndarray:
        values = self.features.axis_values([c.text for c in candidates])
        if params:
            values = np.hstack([values, [[float(c.params[p]) for p in params] for c in candidates]])
        return values

    @staticmethod
    def _utility(model, values: np.ndarray) -> np.ndarray:
        """Expected liking: Σ P(class)·utility(class) with liked 1, neutral 0.5, disliked 0."""
        weights = np.array([UTILITY[c] for c in model.classes_])
        return model.predict_proba(values) @ weights

    # --- the three ways to choose --------------------------------------------------------------

    def _fresh(self, candidates: Sequence[Candidate], recent: Sequence[str]) -> list[Candidate]:
        window = self.settings.avoid_recent
        avoid = set(recent[-window:]) if window else set()
        fresh = [c for c in candidates if c.theme not in avoid]
        if not fresh:
            log.info("every candidate theme was shown in the last %d nights; allowing repeats", window)
            return list(candidates)
        return fresh

    def _variety(self, pool, ratings, recent, rng, why: str) -> Choice:
        """Least-shown theme and style first, then feed popularity; ties at random."""
        shown = Counter([r.candidate.theme for r in ratings] + list(recent))
        styles = Counter(r.candidate.style for r in ratings)
        top_pop = max((c.popularity for c in pool), default=0.0) or 1.0
        score = np.array(
            [
                0.5 / (1 + shown[c.theme]) + 0.25 / (1 + styles[c.style]) + 0.25 * c.popularity / top_pop
                for c in pool
            ]
        )
        pick = pool[_argmax_random(score, rng)]
        reason = (
            f"{why}: choosing for variety — theme {pick.theme!r} was shown {shown[pick.theme]} "
            f"times before" + (f", feed popularity {pick.popularity:g}" if pick.popularity else "")
        )
        return Choice(pick, "variety", None, reason, {"reason": reason, "ratings": len(ratings)})

    def _explore(self, pool, ratings, utility, rng) -> Choice:
        """A random candidate among the least-rated themes, so the model sees new kinds of pictures."""
        rated = Counter(r.candidate.theme for r in ratings)
        fewest = min(rated[c.theme] for c in pool)
        options = [i for i, c in enumerate(pool) if rated[c.theme] == fewest]
        i = int(rng.choice(options))
        reason = (
            f"exploring (rate {self.settings.explore_rate:g}): theme {pool[i].theme!r} has "
            f"{fewest} ratings; the model expected {utility[i]:.2f} liking"
        )
        return Choice(
            pool[i], "explore", float(utility[i]), reason, {"reason": reason, "ratings": len(ratings)}
        )

    def _explained(self, model, names, pick: Candidate, row: np.ndarray, utility: float, ratings) -> Choice:
        explanation = model.explain(row[None, :], sentence=SENTENCE).to_dict()
        by_id = {
            r.picture_id if r.picture_id is not None else f"rating-{i}": r for i, r in enumerate(ratings)
        }
        for space in explanation["subspaces"]:
            for n in space["neighbours"]:
                n["theme"], n["prompt"] = (
                    by_id[n["row_id"]].candidate.theme,
                    by_id[n["row_id"]].candidate.text,
                )
        top = max(explanation["subspaces"], key=lambda s: s["contribution"].get("liked", 0.0), default=None)
        reason = f"expected liking {utility:.2f}" + (f": {top['summary']}" if top else "")
        explanation.update({"reason": reason, "ratings": len(ratings), "features": names, "search": model.mode_})
        return Choice(pick, "model", float(utility), reason, explanation)


def reselect(chosen_at: int, n_ratings: int, growth: float = 0.25) -> bool:
    """Whether to re-run the mode choice: the ratings changed in number other than by growing, or
    grew by at least ``growth`` × the count it was made on. One more rating among forty hardly moves
    an inner cross-validation, and re-choosing on a geometric schedule keeps the number of choices
    logarithmic in the number of ratings (10 → 60 ratings: 8 choices instead of 50)."""
    return n_ratings < chosen_at or n_ratings >= chosen_at * (1.0 + growth)


def _shared_params(candidates: Sequence[Candidate], reserved: set[str]) -> list[str]:
    """Generation parameters every candidate carries (others can't be compared), sorted."""
    if not candidates:
        return []
    shared = set.intersection(*(set(c.params) for c in candidates))
    return sorted(shared - reserved)


def finite_candidates(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[str]]:
    """The candidates whose numbers (popularity, parameters) are finite, and a line for each other one.

    One feed with a weight that overflowed (1e308 × 100 = inf) made every variety score inf/inf = nan
    and every night failed; such a candidate is left out, logged and named in the explanation, and
    the others are chosen from. Only when nothing is left is it an error."""
    usable, skipped = [], []
    for c in candidates:
        bad = [name for name, value in (("popularity", c.popularity), *sorted(c.params.items()))
               if not math.isfinite(float(value))]
        if bad:
            line = f"{c.theme} ({c.source}): {', '.join(bad)} is not a finite number"
            log.warning("taste: skipping candidate %s", line)
            skipped.append(line)
        else:
            usable.append(c)
    if not usable:
        raise FrameError("taste: no usable candidates; skipped " + "; ".join(skipped))
    return usable, skipped


def _argmax_random(values: np.ndarray, rng: np.random.Generator) -> int:
    """The index of the highest finite value, ties at random (a nan would match nothing)."""
    finite = np.isfinite(values)
    if not finite.any():
        raise FrameError("taste: no candidate has a finite score")
    top = values[finite].max()
    best = np.flatnonzero(finite & (values >= top - 1e-12))
    return int(best[0] if len(best) == 1 else rng.choice(best))
