"""Tonight's theme choice in the worker: the taste picker (``frame.taste.picker.ThemePicker``) over the
job's candidates and the owner's rating history, with the explanation (and, when the model chose, a
plot) stored beside the picture.

Runs only in worker processes, and when the taste model is trained (scikit-learn) in the worker's
short child (``tastechild.py``), which leaves the plot's numbers (``PLOT_DATA_NAME``) for a second
child to draw with matplotlib (``plotchild.py``): the two libraries never share a process. The random
generator is seeded from the job's seed, so a restarted worker makes the same choice.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from frame.config.schema import Config, TasteConfig
from frame.install_hints import extra_install
from frame.statefile import write_json
from frame.taste.features import Candidate
from frame.taste.picker import TasteSettings, ThemePicker
from frame.taste.plot_data import plot_data
from frame.taste.ratings import Rating
from frame.worker.records import JobCandidate, RatedPicture, RenderJob, ThemeChoice, Why

log = logging.getLogger(__name__)

PLOT_NAME = "why.png"
PLOT_DATA_NAME = "why-plot.json"  # the plot's numbers, from the taste child to the plot child
NO_MATPLOTLIB = ("The plot of your nearest rated pictures needs matplotlib, which is not installed: "
                 f"{extra_install('plots')} adds it (a Pi installed by tools/install-pi.sh has it, unless "
                 "--no-plots).")


def _settings(taste: TasteConfig):
    return TasteSettings(themes=tuple(taste.themes), styles=tuple(taste.styles), explore_rate=taste.explore_rate,
                         min_ratings=taste.min_ratings, avoid_recent=taste.avoid_recent,
                         n_neighbors=taste.n_neighbors, axes=dict(taste.axes) or None)


def picker_for(config: Config, embed: Any):
    """The taste picker for the ``taste`` settings in ``config``."""

    return ThemePicker(embed, _settings(config.taste))


def to_candidate(item: JobCandidate):
    """A job candidate (config combination or feed prompt) as a taste ``Candidate``."""

    if item.origin.startswith("feed:"):
        return Candidate(theme=item.theme or item.prompt, style=item.style, prompt=item.prompt, source=item.origin,
                         popularity=float(item.weight))
    return Candidate(theme=item.theme, style=item.style, source="config")


def to_rating(picture: RatedPicture):
    """A rated picture from the store as a taste ``Rating`` (the candidate it was made from)."""

    if picture.candidate:
        candidate = Candidate.from_dict(dict(picture.candidate))
    else:
        candidate = Candidate(theme=picture.theme or picture.prompt, style=picture.style or "",
                              prompt=picture.prompt, source=picture.origin or "config")
    value = picture.rating_value == 1 if picture.rating_kind == "thumb" else int(picture.rating_value)
    return Rating(candidate, value, picture.id)


def matplotlib_installed() -> bool:
    """Whether the optional ``plots`` extra is installed, without importing it (the taste child only
    says whether the plot child can draw)."""
    if "matplotlib" in sys.modules:
        return sys.modules["matplotlib"] is not None
    return importlib.util.find_spec("matplotlib") is not None


def _plot(picker: Any, ratings: list, pool: list, row: Any, job_dir: Path, draw_here: bool) -> dict[str, str]:
    """The explanation plot (the owner's rated pictures in the deciding subspaces, tonight's as a star):
    ``{"plot": file name}``, or ``{"plot_note": why there is none}`` for the phone page. Unless
    ``draw_here``, only its numbers are written (``PLOT_DATA_NAME``) and the plot child draws it."""
    if not matplotlib_installed():
        return {"plot_note": NO_MATPLOTLIB}
    try:
        model, _names, params = picker.fit(ratings, pool)
        if params:
            return {}
        data = plot_data(model, row)
        if not draw_here:
            write_json(job_dir / PLOT_DATA_NAME, data.to_json())
            return {"plot": PLOT_NAME}
        from frame.taste.plots import draw

        draw(data, job_dir / PLOT_NAME)
        return {"plot": PLOT_NAME}
    except (ValueError, ImportError, OSError) as exc:
        log.warning("no explanation plot: %s", exc)
        return {"plot_note": f"No plot tonight: {exc}"}


def pick(job: RenderJob, config: Config, embed: Any, job_dir: Path, draw_here: bool = True) -> ThemeChoice:
    """Run the picker; return the choice the worker stores (``why``: the picker's JSON explanation
    with its sentence and, when the model chose, the plot; drawn here, or with ``draw_here`` False
    left as numbers for the plot child)."""

    picker = picker_for(config, embed)
    items = job.candidates
    pool = [to_candidate(item) for item in items]
    ratings = [to_rating(p) for p in job.history]
    choice = picker.pick(pool, ratings, list(job.recent_themes), rng=np.random.default_rng(job.seed))
    item = items[pool.index(choice.candidate)]
    row = picker.features.axis_values([choice.candidate.text])[0]
    details = dict(choice.to_dict())
    if choice.mode == "model":
        details.update({"plot": None, **_plot(picker, ratings, pool, row, job_dir, draw_here)})
    return ThemeChoice(
        prompt=choice.candidate.text, theme=choice.candidate.theme, style=choice.candidate.style,
        origin=item.origin, negative_prompt=item.negative_prompt or "", feed_item_id=item.feed_item_id,
        why=Why(method=f"taste ({choice.mode})", sentence=choice.reason, details=details),
        features={name: round(float(v), 5) for name, v in zip(picker.features.axes, row)})
