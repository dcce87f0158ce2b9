"""``frame demo``: one whole night on the bundled demo model and the virtual panel.

It runs exactly the daemon's nightly job (theme choice, generation in a supervised worker with per-step
checkpoints, panel preparation, the store, the virtual panel) with a configuration that points at the
bundled model and a local state folder, so a newcomer sees every part work without hardware or a
multi-gigabyte download.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from frame.models import DEMO_SOURCE

if TYPE_CHECKING:
    from frame.config import Config

log = logging.getLogger(__name__)
DEMO_SIZE = "256x160"


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser(
        "demo", help="run one whole night on the bundled demo model and the virtual panel",
        description="Choose a theme and prompt, generate a picture with the bundled demo model (random "
                    "weights: it paints abstract noise), prepare it for the panel, show it on the virtual "
                    "panel (a PNG) and record it in the store. Prints where the files are.")
    demo.add_argument("--state-dir", metavar="DIR",
                      help="where pictures, database and checkpoints go (default: ./frame-demo)")
    demo.add_argument("--steps", type=int, default=None,
                      help="denoising steps (default: model.steps, else the demo model's default, 8)")
    demo.set_defaults(func=run_demo)


def demo_config(base: Config, state_dir: Path, steps: int | None) -> Config:
    """The owner's configuration with the demo model, the virtual panel and a local state folder.
    Steps: ``--steps``, else ``model.steps``, else the demo model's own default (``DEMO_DEFAULT_STEPS``),
    which ``frame render`` and the daemon use too."""
    model = dataclasses.replace(base.model, source=DEMO_SOURCE, steps=steps or base.model.steps,
                                size=DEMO_SIZE if base.model.size == "auto" else base.model.size)
    display = dataclasses.replace(base.display, panel="virtual", out_dir="")
    return dataclasses.replace(base, state_dir=str(state_dir), model=model, display=display)


class _ProgressLine:
    """Prints the render's progress on one line of stderr, like a progress bar."""

    def __init__(self) -> None:
        self._last = ""

    def __call__(self, snapshot: dict) -> None:
        render = snapshot.get("render") or {}
        step, total, stage = render.get("step"), render.get("steps"), render.get("stage", "")
        text = f"  {stage} {step}/{total}" if step is not None and total else f"  {stage}"
        if text != self._last and sys.stderr.isatty():
            print(f"\r{text:<60}", end="", file=sys.stderr, flush=True)
        self._last = text

    def done(self) -> None:
        if self._last and sys.stderr.isatty():
            print(file=sys.stderr)


def run_demo(args: argparse.Namespace) -> int:
    from frame.config import load_config
    from frame.daemon.jobs.night import run_night

    state_dir = Path(args.state_dir or "frame-demo").resolve()
    config = demo_config(load_config(args.config), state_dir, args.steps)
    print(f"frame demo: one night on the bundled demo model (random weights: it paints abstract noise)\n"
          f"  state folder: {state_dir}")
    progress = _ProgressLine()
    started = time.monotonic()
    try:
        result = run_night(config, show=True, progress=progress)
    finally:
        progress.done()
    print(f"  theme:    {result.theme}\n  prompt:   {result.prompt}\n"
          f"  picture:  {result.image}\n  panel:    {result.panel}\n"
          f"  shown on the virtual panel: {result.shown}\n"
          f"  database: {state_dir / 'frame.db'}\n"
          f"done in {time.monotonic() - started:.1f} s (picture #{result.picture_id}, "
          f"worker peak {result.peak_rss_mb:.0f} MiB RSS, as the log says)")
    return 0
