"""Top-level commands that belong to no single part: ``frame demo`` and ``frame config ...``."""

from __future__ import annotations

import argparse
import sys

import yaml


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser(
        "demo", help="run one whole night on the bundled demo model and the virtual panel",
        description="Choose a theme and prompt, generate a picture with the bundled demo model (random "
                    "weights: it paints abstract noise), prepare it for the panel, show it on the virtual "
                    "panel (a PNG) and record it in the store. Prints where the files are.")
    demo.add_argument("--state-dir", metavar="DIR",
                      help="where pictures, database and checkpoints go (default: ./frame-demo)")
    demo.add_argument("--steps", type=int, default=None, help="denoising steps (default: the demo's 8)")
    demo.set_defaults(func=_demo)

    config = subparsers.add_parser("config", help="check or print the configuration")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION")
    check = config_sub.add_parser(
        "check", help="validate a configuration file and report every problem at once",
        description="Validate FILE (default: the file frame would use) layered over the built-in defaults "
                    "and FRAME_* environment overrides. Exit 0 when valid, 2 with one line per problem.")
    check.add_argument("file", nargs="?", metavar="FILE", help="file to check")
    check.set_defaults(func=_config_check)
    show = config_sub.add_parser("show", help="print the effective configuration (secrets hidden)")
    show.add_argument("file", nargs="?", metavar="FILE", help="file to layer over the defaults")
    show.set_defaults(func=_config_show)
    config.set_defaults(func=lambda args: config.print_help(sys.stderr) or 2)


def _config_check(args: argparse.Namespace) -> int:
    from frame.config import check_config

    path = args.file or args.config
    config = check_config(path)
    print(f"{path or 'configuration'}: ok")
    _describe_onnxstream(config)
    _describe_model(config)
    _describe_estimate(config)
    return 0


def _describe_onnxstream(config) -> None:
    """Say what an OnnxStream model folder holds: model kind, and each component's weight precision."""
    from frame.diffusion.onnxstream_layout import OnnxStreamFiles, is_onnxstream_folder
    from frame.models import resolve_model_source

    source = resolve_model_source(config.model.source)
    if "://" in source or not is_onnxstream_folder(source):
        return
    for line in OnnxStreamFiles(source).summary_lines():
        print(f"model.source: {line}")


def _describe_model(config) -> None:
    """The model folder's weight precision per component, and a VAE that cannot be tiled (issue 11)."""
    from pathlib import Path

    from frame.diffusion.model_check import describe_folder
    from frame.diffusion.onnxstream_layout import is_onnxstream_folder
    from frame.models import resolve_model_source

    source = resolve_model_source(config.model.source)
    if "://" in source or not Path(source).expanduser().is_dir() or is_onnxstream_folder(source):
        return
    for level, line in describe_folder(Path(source).expanduser(), config.model.vae_tile):
        print(f"model.source: {'warning: ' if level == 'warning' else ''}{line}")


def _describe_estimate(config) -> None:
    """The night's estimate (``frame estimate`` has the details and a longer measurement)."""
    from frame.estimate.commands import config_check_lines

    for line in config_check_lines(config):
        print(f"estimate: {line}")


def _config_show(args: argparse.Namespace) -> int:
    from frame.config import load_config, to_plain

    config = load_config(args.file or args.config)
    yaml.safe_dump(to_plain(config), sys.stdout, sort_keys=False, allow_unicode=True)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from frame.demo import run_demo

    return run_demo(args)
