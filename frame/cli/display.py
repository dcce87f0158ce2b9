"""CLI: ``frame display test`` (calibration bars) and ``frame show IMAGE``.

Import-light on purpose: numpy, Pillow and drivers load inside the handlers.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from typing import get_args

from frame.config.schema import DitherName, FitName, Rotation

log = logging.getLogger(__name__)



def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``display`` (with ``test``) and ``show`` to the frame CLI."""
    display = subparsers.add_parser("display", help="panel tools (calibration)")
    actions = display.add_subparsers(dest="display_command", required=True)
    test = actions.add_parser("test", help="show colour bars and a grey ramp to check the panel's colours")
    _panel_options(test)
    test.set_defaults(func=run_test)

    show = subparsers.add_parser("show", help="prepare a picture for the panel and show it")
    show.add_argument("image", help="picture file (PNG, JPEG, WebP, ...)")
    _panel_options(show)
    show.add_argument("--fit", choices=get_args(FitName), help="how to fill the panel (default: display.fit)")
    show.add_argument("--dither", choices=get_args(DitherName), help="dithering method (default: display.dither)")
    show.add_argument("--saturation", type=float, metavar="X",
                      help="colourfulness 0 (grey) .. 1 (as is); default: panel default")
    show.add_argument("--rotate", type=int, choices=get_args(Rotation), help="turn the picture clockwise")
    show.add_argument("--force", action="store_true", help="refresh even if the picture is unchanged")
    show.set_defaults(func=run_show)


def _panel_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--panel", metavar="NAME", help="panel name (default: display.panel; "
                                                        "'virtual' writes PNGs)")
    parser.add_argument("--out", metavar="FILE", help="virtual panel: write the simulated panel PNG here "
                                                      "(a -preview.png goes next to it)")


def _open(args: argparse.Namespace, **overrides):
    from frame.config import load_config, state_dir
    from frame.display.device import DisplaySettings, open_display

    config = load_config(args.config)
    changes = {key: value for key, value in overrides.items() if value is not None}
    if getattr(args, "panel", None):
        changes["panel"] = args.panel
    display_config = dataclasses.replace(config.display, **changes)
    return open_display(DisplaySettings.from_section(display_config), state_dir=state_dir(config),
                        out_file=getattr(args, "out", None))


def _report(result) -> int:
    stream = sys.stdout if result.status != "too-soon" else sys.stderr
    print(result.message, file=stream)
    for path in result.paths:
        print(f"  wrote {path}")
    return 0 if result.status != "too-soon" else 1


def run_show(args: argparse.Namespace) -> int:
    """``frame show IMAGE``: returns 0 when shown or unchanged, 1 when the panel needs more rest."""
    with _open(args, fit=args.fit, dither=args.dither, saturation=args.saturation, rotate=args.rotate) as display:
        force = args.force or bool(args.out)  # an explicit output file is always written
        return _report(display.show(args.image, force=force))


def run_test(args: argparse.Namespace) -> int:
    """``frame display test``: one bar per ink (exact, undithered) above a dithered grey ramp."""
    from frame.display.calibration import calibration_image

    with _open(args) as display:
        prepared, original = calibration_image(display.panel, display.settings.dither)
        return _report(display.show_prepared(prepared, original, force=True))
