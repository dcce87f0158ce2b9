"""The owner's verdicts on pictures and how they map to classes the taste model learns.

A verdict is a like/dislike (bool or word) or 1–5 stars: 4–5 stars = liked, 3 = neutral, 1–2 =
disliked. ``UTILITY`` turns class probabilities into one "expected liking" number for ranking.

"More like this" on the phone page is stored as 5 stars (``frame.daemon.queue.STRONG_LIKE_STARS``),
the strongest verdict there is: it replaces an earlier rating of the picture as its latest one, so the
model learns it as liked whatever the owner said before (``tests/daemon/test_queue.py``). The
classifier has no per-rating weights, so "strong" means the top of the scale, not a heavier vote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frame.errors import FrameError
from frame.taste.features import Candidate

UTILITY = {"liked": 1.0, "neutral": 0.5, "disliked": 0.0}

_WORDS = {
    "like": "liked",
    "liked": "liked",
    "up": "liked",
    "yes": "liked",
    "love": "liked",
    "dislike": "disliked",
    "disliked": "disliked",
    "down": "disliked",
    "no": "disliked",
    "neutral": "neutral",
    "meh": "neutral",
}


def rating_class(value: Any) -> str:
    """Map a verdict to "liked", "neutral" or "disliked"; anything else is a clear error."""
    if isinstance(value, bool):
        return "liked" if value else "disliked"
    if isinstance(value, int | float) and float(value).is_integer() and 1 <= value <= 5:
        stars = int(value)
        return "liked" if stars >= 4 else "neutral" if stars == 3 else "disliked"
    if isinstance(value, str) and value.strip().lower() in _WORDS:
        return _WORDS[value.strip().lower()]
    raise FrameError(f"rating {value!r} is not like/dislike (bool or word) or 1–5 stars")


@dataclass(frozen=True)
class Rating:
    """What the owner thought of one picture: the candidate it was made from, the verdict, and the
    picture's id (shown in explanations as the similar rated picture)."""

    candidate: Candidate
    value: bool | int | str
    picture_id: str | int | None = None

    def __post_init__(self) -> None:
        rating_class(self.value)  # fail at construction, not nights later

    def to_dict(self) -> dict:
        """Plain JSON form for the daemon's store; :meth:`from_dict` restores it."""
        return {"candidate": self.candidate.to_dict(), "value": self.value, "picture_id": self.picture_id}

    @classmethod
    def from_dict(cls, data: dict) -> Rating:
        return cls(Candidate.from_dict(data["candidate"]), data["value"], data.get("picture_id"))
