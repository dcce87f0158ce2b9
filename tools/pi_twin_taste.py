"""The Pi twin's second night: one the trained taste model chooses, as an owner's normal night is.

Used by tools/pi_twin.py. The first night paints a queued prompt with a fixed seed, so its picture
can be compared with x86; a queued prompt skips the taste model, so that night never starts the
taste child (``python -m frame.worker.tastechild``, a child of the render worker that waits). This
night does, inside the same cgroup, beside the daemon and the waiting worker:

1. before the daemon starts, the state folder gets ``RATED`` painted pictures (theme pictures, a small
   PNG each in the gallery, rated thumbs up or down) in the store, written by frame's own store code
   running in the rootfs as the unit's user (so the files are laid out and owned as on a Pi);
2. the night config sets ``taste.explore_rate`` to 0, so the model (not an exploration draw) chooses;
3. after the first night's picture is on the panel, the phone presses "render now"; the daemon builds
   the job as for a night (no queued prompt left: candidates and the rating history), the worker
   embeds the candidates and starts the taste child, which trains the model and draws its plot;
4. the night passes when the new picture's ``why`` says ``taste (model)`` (:func:`taste_problem`).

Pure logic (the ratings plan, the config, the verdict) is tested on x86 in tests/install/test_pi_twin.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

RATED = 12  # >= taste.min_ratings (10 by default), two classes: the model trains
MODEL_METHOD = "taste (model)"

# Runs as the unit's user in the rootfs with /opt/frame's python: frame's own store writes the rows,
# a small PNG per picture goes where the gallery keeps its files. argv: config path, the plan (JSON).
SEED_SCRIPT = """
import json, sys
from PIL import Image
from frame.config import load_config, state_dir
from frame.daemon.store.database import Store
from frame.daemon.store.gallery import picture_path
config = load_config(sys.argv[1])
folder = state_dir(config)
store = Store.open(folder)
try:
    for i, (theme, style, value) in enumerate(json.loads(sys.argv[2])):
        name = f"twin-rated-{i:02d}.png"
        path = picture_path(folder, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (256, 160), (40 + 15 * i, 90, 200 - 10 * i)).save(path)
        picture = store.add_picture(night=f"2026-01-{i + 1:02d}", file=name, prompt=f"{theme}, {style}",
                                    theme=theme, style=style, origin="theme", seed=i, width=256, height=160,
                                    model="demo")
        store.rate(picture, "thumb", value)
finally:
    store.close()
print(len(json.loads(sys.argv[2])))
"""


def rated_plan(themes: Sequence[str], styles: Sequence[str], count: int = RATED) -> list[tuple[str, str, int]]:
    """``count`` rated pictures, (theme, style, thumb): the first half of the themes liked (+1), the
    rest disliked (-1), styles in turn, so the model has two classes and something to learn."""
    if len(themes) < 2 or not styles:
        raise ValueError(f"the taste model needs two themes or more and a style, got {len(themes)} and {len(styles)}")
    if count < 2:
        raise ValueError(f"the taste model needs at least two ratings, got {count}")
    plan = []
    for i in range(count):
        theme = themes[i % len(themes)]
        plan.append((theme, styles[i % len(styles)], 1 if themes.index(theme) < len(themes) // 2 else -1))
    return plan


def taste_config(config: dict[str, Any]) -> dict[str, Any]:
    """The night config with ``taste.explore_rate`` 0: the trained model chooses, not an exploration
    draw (which would need no child), so every twin run exercises the same path."""
    return {**config, "taste": {**(config.get("taste") or {}), "explore_rate": 0.0}}


def taste_problem(why: dict[str, Any] | None) -> str | None:
    """What is wrong with a taste night's picture, by its stored ``why`` (None: the trained model
    chose it, and its plot or the reason for none is recorded)."""
    if not isinstance(why, dict):
        return "the picture has no why"
    if why.get("method") != MODEL_METHOD:
        return f"chosen by {why.get('method')!r}, not {MODEL_METHOD!r}"
    if not why.get("plot") and not why.get("plot_note"):
        return "the model chose but neither drew a plot nor said why not"
    return None


@dataclass
class TasteNight:
    picture_id: int
    prompt: str
    sentence: str
    plot: str | None
    seconds: float


def drive_taste_night(phone: Any, *, night_seconds: float, until: Callable[..., Any],
                      browse: Callable[[], None]) -> TasteNight:
    """Press "render now" and wait (browsing pages) for a new picture; return it once the model chose it.
    ``until`` is tools/pi_twin_phone.py's bounded wait; raises its error or ``ValueError`` (the verdict)."""
    before = max((p["id"] for p in phone.api("GET", "/api/pictures?limit=5")["pictures"]), default=0)
    started = time.monotonic()
    phone.api("POST", "/api/render", {}, expect=(202,))

    def painted() -> dict[str, Any] | None:
        pictures = phone.api("GET", "/api/pictures?limit=5")["pictures"]
        return next((p for p in pictures if p["id"] > before and p["origin"] != "upload"), None)

    picture = until("the taste night's picture", painted, night_seconds, browse, every=3.0)
    detail = phone.api("GET", f"/api/pictures/{picture['id']}")
    why = detail.get("why")
    problem = taste_problem(why)
    if problem:
        raise ValueError(f"the taste night's picture {picture['id']}: {problem}: {json.dumps(why)[:300]}")
    return TasteNight(picture["id"], picture["prompt"], why.get("sentence", ""), why.get("plot"),
                      time.monotonic() - started)
