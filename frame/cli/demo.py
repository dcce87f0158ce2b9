"""``frame demo``: one whole night on the bundled demo model and the virtual panel.

It runs exactly the daemon's nightly job (theme choice, generation in a supervised worker with per-step
checkpoints, panel preparation, the store, the virtual panel) with a configuration that points at the
bundled model and a local state folder, so a newcomer sees every part work without hardware or a
multi-gigabyte download. The picture has the size a night paints for the panel (672x400 for the demo
model on the 800x480 panel), not a smaller one that would hide what a night looks like.

The engine's log goes to ``<state>/demo.log`` (warnings still reach the terminal), so the summary is
what the owner reads; it ends with the one command that serves the phone page on this demo's state
(``frame --config <state>/config.yaml run``, a configuration the demo writes once) and its address.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from frame.models import DEMO_SOURCE

if TYPE_CHECKING:
    from frame.config import Config

log = logging.getLogger(__name__)
LOG_FILE = "demo.log"
CONFIG_FILE = "config.yaml"
DEMO_LISTEN = "127.0.0.1:8080"  # this computer only: the demo's page is not offered to the LAN


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
    model = dataclasses.replace(base.model, source=DEMO_SOURCE, steps=steps or base.model.steps)
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


def _log_to_file(path: Path, debug: bool) -> None:
    """The night's log (the worker's lines included) into ``path``; the terminal keeps warnings, or
    everything with ``--debug``. About 20 lines of engine log once came before the summary."""
    import os

    from frame.config import environment

    if not debug:
        os.environ[environment.WORKER_LOG_FILE] = str(path)  # the workers inherit it
    root = logging.getLogger()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        for existing in root.handlers:
            existing.setLevel(logging.WARNING)
    root.addHandler(handler)


def demo_config_text(state_dir: Path, steps: int | None) -> str:
    """The configuration ``frame run`` needs to serve the phone page on this demo's state."""
    lines = ["# Written by 'frame demo': the daemon on the demo's state, with its phone page on this computer.",
             f"#   frame --config {state_dir / CONFIG_FILE} run",
             "# web.listen 0.0.0.0:8080 opens the page to phones on your network.",
             f"state_dir: {json.dumps(str(state_dir))}", "model:", "  source: demo"]
    if steps:
        lines.append(f"  steps: {int(steps)}")
    lines += ["display:", "  panel: virtual", "web:", f"  listen: {DEMO_LISTEN}"]
    return "\n".join(lines) + "\n"


def _write_config(state_dir: Path, steps: int | None) -> tuple[Path, bool]:
    """``<state>/config.yaml`` for the phone page, written once (an owner's edits are kept)."""
    from frame.atomicfile import write_bytes_atomic

    path = state_dir / CONFIG_FILE
    if path.exists():
        return path, False
    write_bytes_atomic(path, demo_config_text(state_dir, steps).encode("utf-8"))
    return path, True


def _phone_page(config_path: Path) -> str:
    """The lines that say how to open the phone page on this demo's state."""
    from frame.config import load_config
    from frame.net.addresses import page_urls

    listen = load_config(str(config_path)).web.listen
    return (f"the phone page on this demo (Ctrl-C stops it):\n"
            f"  frame --config {config_path} run\n"
            f"  then open {page_urls(listen)[0]} and log in with the token that "
            f"'frame --config {config_path} token' prints")


def run_demo(args: argparse.Namespace) -> int:
    from frame.atomicfile import make_dirs
    from frame.config import load_config
    from frame.daemon.jobs.night import run_night

    state_dir = Path(args.state_dir or "frame-demo").resolve()
    config = demo_config(load_config(args.config), state_dir, args.steps)
    make_dirs(state_dir)
    _log_to_file(state_dir / LOG_FILE, bool(getattr(args, "debug", False)))
    print(f"frame demo: one night on the bundled demo model (random weights: it paints abstract noise)\n"
          f"  state folder: {state_dir}")
    progress = _ProgressLine()
    started = time.monotonic()
    try:
        result = run_night(config, show=True, progress=progress)
    finally:
        progress.done()
    config_path, written = _write_config(state_dir, args.steps)
    print(f"  theme:    {result.theme}\n  prompt:   {result.prompt}\n"
          f"  picture:  {result.image} ({_size(result.image)})\n  panel:    {result.panel}\n"
          f"  shown on the virtual panel: {result.shown}\n"
          f"  database: {state_dir / 'frame.db'}\n"
          f"  log:      {state_dir / LOG_FILE}\n"
          f"  config:   {config_path}{'' if written else ' (kept: written by an earlier demo)'}\n"
          f"done in {time.monotonic() - started:.1f} s (picture #{result.picture_id}, "
          f"worker peak {result.peak_rss_mb:.0f} MiB RSS, as the log says)\n"
          + _phone_page(config_path))
    return 0


def _size(path: Path | None) -> str:
    """"672x400" from the PNG's header (its IHDR chunk), without loading Pillow into this process."""
    try:
        with open(path, "rb") as file:  # type: ignore[arg-type]
            head = file.read(24)
    except (OSError, TypeError):
        return "size unknown"
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return "size unknown"
    return f"{int.from_bytes(head[16:20], 'big')}x{int.from_bytes(head[20:24], 'big')}"
