"""``frame estimate``: how long tonight's render takes here and on a Pi Zero 2 W, and whether it fits."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "estimate", help="count the configured model and project the night here and on a Pi Zero 2 W",
        description="Count the configured model from its graph (multiply-adds and weight bytes per step, peak "
                    "memory, bytes read per night; no weights are read), measure this machine for a few "
                    "seconds through the engine, and project the night here and on a Raspberry Pi Zero 2 W "
                    "against the configured render window. Options override the configuration.")
    parser.add_argument("--source", metavar="FOLDER|URL", help="model to estimate (default: model.source)")
    parser.add_argument("--size", metavar="WxH", help="picture size (default: model.size)")
    parser.add_argument("--steps", type=int, metavar="N", help="denoising steps (default: model.steps)")
    parser.add_argument("--guidance", type=float, metavar="G", help="guidance scale (default: model.guidance)")
    parser.add_argument("--sampler", help="sampler (default: model.sampler)")
    parser.add_argument("--queued", action="store_true",
                        help="a night that renders a queued prompt: no taste choice (no prompt embeddings)")
    parser.add_argument("--new-texts", type=int, metavar="N",
                        help="texts the taste choice embeds tonight (default: those of the configured themes, "
                             "styles, axes, feed items and rated prompts not kept from earlier nights)")
    parser.add_argument("--new-text-tokens", type=int, metavar="T",
                        help="with --new-texts: token positions of the longest of those texts through its "
                             "end-of-text, start and end tokens included (the picker runs no further; "
                             "default 77: padded, an upper bound)")
    parser.add_argument("--measure-seconds", type=float, default=8.0, metavar="S",
                        help="time spent measuring this machine (default 8; longer probes more step kinds)")
    parser.add_argument("--link-mbit", type=float, metavar="MBIT",
                        help="the Pi's Wi-Fi throughput for a URL model, in Mbit/s (default 24)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="also write the result to DIR/estimate.json for the phone's settings page")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    # who asked, as the settings page says it ("Made ... by the settings page"): its button's child
    parser.add_argument("--origin", default="frame estimate", help=argparse.SUPPRESS)
    parser.set_defaults(func=_estimate)


def _overrides(config, args: argparse.Namespace):  # noqa: ANN001, ANN202
    from dataclasses import replace

    model = config.model
    changes = {k: v for k, v in (("source", args.source), ("size", args.size), ("guidance", args.guidance),
                                 ("sampler", args.sampler), ("steps", args.steps)) if v is not None}
    return replace(config, model=replace(model, **changes)) if changes else config


@dataclass(frozen=True)
class StoreFacts:
    """What the estimate reads from the store: rated pictures (None: no store, a trained model is
    assumed), the feed prompts valid now and the rated painted pictures' prompts."""

    ratings: int | None = None
    feed_prompts: tuple[str, ...] = ()
    rated_prompts: tuple[str, ...] = ()


def _store_facts(config) -> StoreFacts:  # noqa: ANN001
    """The store's facts, read in one read-only opening of the configured state folder's store
    (estimating never changes or creates it). Each read that fails only means "unknown": an
    unreadable store gives the defaults, an older schema loses only what it lacks."""
    from frame.config import state_dir
    from frame.daemon.store.database import Store

    try:
        store = Store.open_read_only(state_dir(config))
    except sqlite3.Error:
        return StoreFacts()
    if store is None:
        return StoreFacts()
    try:
        return StoreFacts(_or_none(store.rated_picture_count),
                          tuple(_or_none(lambda: [item["prompt"] for item in store.feed_items()]) or ()),
                          tuple(_or_none(store.rated_painted_prompts) or ()))
    finally:
        store.close()


def _or_none(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except sqlite3.Error:
        return None


def _tonight(config, facts: StoreFacts):  # noqa: ANN001, ANN202
    """The texts tonight's choice asks for (``frame.estimate.new_texts``): the configured ones, the
    feed prompts valid now and the rated pictures' prompts, read from the store."""
    from frame.estimate.new_texts import tonight_texts

    return tonight_texts(config, facts.feed_prompts, facts.rated_prompts, facts.ratings)


def config_check_lines(config, measure_seconds: float = 1.0) -> list[str]:  # noqa: ANN001
    """``frame config check``'s estimate lines (a short measurement); a failure is one warning line,
    never a failed check: the estimate is advice, the configuration may still be valid."""
    from pathlib import Path

    from frame.config import state_dir
    from frame.estimate.configured import estimate_config
    from frame.estimate.report import lines

    try:  # this machine's last measurement, kept in the state folder, while recent (frame.estimate.rates_file)
        facts = _store_facts(config)
        return lines(estimate_config(config, measure_seconds=measure_seconds, ratings=facts.ratings,
                                     texts=_tonight(config, facts), rates_dir=Path(state_dir(config))))
    except Exception as exc:  # noqa: BLE001 - reported, not raised (see above)
        return [f"warning: no estimate: {exc}"]


def _texts(config, args: argparse.Namespace, facts: StoreFacts):  # noqa: ANN001, ANN202
    if args.queued:
        return 0
    return args.new_texts if args.new_texts is not None else _tonight(config, facts)


def _estimate(args: argparse.Namespace) -> int:
    import os

    from frame.config import environment, load_config
    from frame.errors import UsageError
    from frame.estimate.configured import estimate_config
    from frame.estimate.plan import TOKENS
    from frame.estimate.report import lines, to_dict

    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1, got {args.steps}")
    if args.new_texts is not None and args.new_texts < 0:
        raise UsageError(f"--new-texts must be at least 0, got {args.new_texts}")
    if args.measure_seconds <= 0:
        raise UsageError(f"--measure-seconds must be positive, got {args.measure_seconds}")
    if args.new_text_tokens is not None and (args.new_texts is None or not 2 <= args.new_text_tokens <= TOKENS):
        raise UsageError(f"--new-text-tokens needs --new-texts and a value from 2 to {TOKENS}, "
                         f"got {args.new_text_tokens}")
    if os.environ.get(environment.PARENT_PID):  # the daemon's child (the settings page's button)
        from frame.worker.childmain import die_with_the_daemon

        die_with_the_daemon()  # a daemon that stops or dies takes its estimate with it
    config = _overrides(load_config(args.config), args)
    link = args.link_mbit * 1e6 / 8 if args.link_mbit else None
    facts = _store_facts(config)
    result = estimate_config(config, measure_seconds=args.measure_seconds, link_bytes=link,
                             ratings=facts.ratings, texts=_texts(config, args, facts),
                             choose_tokens=args.new_text_tokens)
    figures = to_dict(result, args.origin, config)
    if args.state_dir:
        from pathlib import Path

        from frame.statefile import write_json

        write_json(Path(args.state_dir) / "estimate.json", figures)
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for line in lines(result):
        print(line)
    return 0
