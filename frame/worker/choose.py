"""Tonight's theme choice in the worker: the taste picker (``frame.taste.picker.ThemePicker``) over the
job's candidates and the owner's rating history, with the explanation (and, when the model chose, a
plot) stored beside the picture.

Runs only in worker processes, and when the taste model is trained (scikit-learn, matplotlib for the
plot) in the worker's short child (``tastechild.py``). The random generator is seeded from the job's
seed, so a restarted worker makes the same choice.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PLOT_NAME = "why.png"
NO_MATPLOTLIB = ("The plot of your nearest rated pictures needs matplotlib, which is not installed "
                 "(pip install 'frame[plots]', or tools/install-pi.sh without --no-plots).")


def _settings(taste: Any):
    from frame.taste.picker import TasteSettings

    return TasteSettings(themes=tuple(taste.themes), styles=tuple(taste.styles), explore_rate=taste.explore_rate,
                         min_ratings=taste.min_ratings, avoid_recent=taste.avoid_recent,
                         n_neighbors=taste.n_neighbors, axes=dict(taste.axes) or None)


def picker_for(config: Any, embed: Any):
    """The taste picker for the ``taste`` settings in ``config``."""
    from frame.taste.picker import ThemePicker

    return ThemePicker(embed, _settings(config.taste))


def to_candidate(item: dict[str, Any]):
    """A job candidate (config combination or feed prompt) as a taste ``Candidate``."""
    from frame.taste.features import Candidate

    if item.get("origin", "").startswith("feed:"):
        return Candidate(theme=item.get("theme") or item["prompt"], style=item.get("style", ""),
                         prompt=item["prompt"], source=item["origin"], popularity=float(item.get("weight", 1.0)))
    return Candidate(theme=item["theme"], style=item.get("style", ""), source="config")


def to_rating(picture: dict[str, Any]):
    """A rated picture from the store as a taste ``Rating`` (the candidate it was made from)."""
    from frame.taste.features import Candidate
    from frame.taste.ratings import Rating

    stored = (picture.get("why") or {}).get("candidate") if isinstance(picture.get("why"), dict) else None
    if stored:
        candidate = Candidate.from_dict(stored)
    else:
        candidate = Candidate(theme=picture.get("theme") or picture["prompt"], style=picture.get("style") or "",
                              prompt=picture["prompt"], source=picture.get("origin") or "config")
    value = picture["rating_value"] == 1 if picture["rating_kind"] == "thumb" else int(picture["rating_value"])
    return Rating(candidate, value, picture["id"])


def _plot(picker: Any, ratings: list, pool: list, choice: Any, row: Any, job_dir: Path) -> dict[str, str]:
    """The explanation plot (the owner's rated pictures in the deciding subspaces, tonight's as a star):
    ``{"plot": file name}``, or ``{"plot_note": why there is none}`` for the phone page."""
    try:
        import matplotlib  # noqa: F401 - the optional `plots` extra
    except ImportError:
        return {"plot_note": NO_MATPLOTLIB}
    try:
        from frame.taste.plots import plot_prediction

        model, _names, params = picker.fit(ratings, pool)
        if params:
            return {}
        plot_prediction(model, row, job_dir / PLOT_NAME)
        return {"plot": PLOT_NAME}
    except (ValueError, ImportError, OSError) as exc:
        log.warning("no explanation plot: %s", exc)
        return {"plot_note": f"No plot tonight: {exc}"}


def pick(job: dict[str, Any], config: Any, embed: Any, job_dir: Path) -> dict[str, Any]:
    """Run the picker; return the choice dict the worker stores (prompt, theme, style, origin,
    negative prompt, ``why`` = the picker's JSON explanation + ``sentence``/``plot``, ``features``)."""
    import numpy as np

    picker = picker_for(config, embed)
    items = job["candidates"]
    pool = [to_candidate(item) for item in items]
    ratings = [to_rating(p) for p in job.get("history", [])]
    choice = picker.pick(pool, ratings, job.get("recent_themes", []), rng=np.random.default_rng(job["seed"]))
    item = items[pool.index(choice.candidate)]
    row = picker.features.axis_values([choice.candidate.text])[0]
    why = {**choice.to_dict(), "sentence": choice.reason, "method": f"taste ({choice.mode})"}
    if choice.mode == "model":
        why.update({"plot": None, **_plot(picker, ratings, pool, choice, row, job_dir)})
    return {"prompt": choice.candidate.text, "theme": choice.candidate.theme, "style": choice.candidate.style,
            "origin": item.get("origin", "theme"), "negative_prompt": item.get("negative_prompt", ""),
            "feed_item_id": item.get("feed_item_id"), "why": why,
            "features": {name: round(float(v), 5) for name, v in zip(picker.features.axes, row)}}
