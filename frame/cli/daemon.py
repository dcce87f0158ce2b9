"""CLI twins of the daemon: ``frame run | status | rate | delete | queue | render-now | token |
install-service``.

Import-light on purpose (the ``frame`` CLI imports every part's commands): Flask, requests and the
daemon modules are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from frame.cli import queue as queue_cli  # argparse only
from frame.errors import FrameError, UsageError

if TYPE_CHECKING:
    from frame.config.schema import Config

log = logging.getLogger(__name__)


def _config(args: argparse.Namespace) -> Any:
    """The client commands' configuration; without a configuration file, a note on stderr naming the
    state folder and daemon they use (``client.config_note``)."""
    from frame.cli.client import config_note
    from frame.config import load_config

    config = load_config(args.config)
    note = config_note(args.config, config)
    if note:
        print(note, file=sys.stderr)
    return config


class NoOwnerToken(FrameError):
    """No token to send: the daemon never started with this configuration (it makes the token)."""


def _client(config: Config):
    """A client of the daemon's API with the owner token: every route needs it, reads too."""
    from frame.cli.client import Client
    from frame.config import state_dir
    from frame.daemon.http.token import read_token

    token = config.web.token or read_token(state_dir(config))
    if not token:
        raise NoOwnerToken("no owner token yet: start the daemon once ('frame run') or set web.token")
    return Client(config, token)


def _setup_logging(config: Config, debug: bool) -> None:
    """journald adds its own timestamps; a terminal gets them from us."""
    level = logging.DEBUG if debug else getattr(logging, config.logging.level.upper())
    journal = bool(os.environ.get("JOURNAL_STREAM"))
    fmt = "%(levelname)s %(name)s: %(message)s" if journal else "%(asctime)s %(levelname)s %(name)s: %(message)s"
    root = logging.getLogger()
    root.setLevel(level)
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stdout))
    for handler in root.handlers:
        handler.setFormatter(logging.Formatter(fmt))
    if not debug:  # APScheduler logs every job addition and run at INFO; our job wrapper says enough
        logging.getLogger("apscheduler").setLevel(logging.WARNING)


def _settings_aside(resolved: Any) -> str | None:
    """A ``settings.yaml`` the daemon cannot use is renamed aside (never deleted) and the daemon runs
    on the layers below it; the sentence returned goes on the phone page and into the log."""
    from frame.config import owner, state_dir
    from frame.redact import redact_text

    if not resolved.owner_problems:
        return None
    aside = owner.set_aside(state_dir(resolved.config))
    where = f"; it was moved to {aside} for you to read" if aside else ""
    problem = (f"The settings made on the phone could not be used ({redact_text('; '.join(resolved.owner_problems))})"
               f"{where}. The frame runs on its configuration file; set them again on the settings page.")
    log.error("%s", problem)
    return problem


def cmd_run(args: argparse.Namespace) -> int:
    from frame.daemon.allocator import settle_startup, tune_allocator, use_system_malloc

    use_system_malloc()  # first: it may re-execute this command line
    tune_allocator()  # before the first thread: freed memory goes back to the system
    from frame.config.loader import config_file_path, resolve
    from frame.daemon.service import Daemon
    from frame.errors import ConfigError
    from frame.web import create_blueprint

    resolved = resolve(args.config)
    if resolved.problems.lines:
        raise ConfigError(resolved.problems.lines, resolved.source)
    config = resolved.config
    _setup_logging(config, args.debug)
    daemon = Daemon(config, config_path=config_file_path(args.config, os.environ), pages=create_blueprint,
                    settings_problem=_settings_aside(resolved))

    def on_signal(signum: int, frame: Any) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        daemon.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        daemon.start()
        log.info("%d startup objects frozen", settle_startup())  # the process's, so not in Daemon.start (tests)
        daemon.run_forever()
    finally:
        daemon.stop()
    return daemon.exit_code  # RESTART_EXIT_CODE when the owner asked for a restart


def _status_offline(config: Config) -> dict[str, Any]:
    import sqlite3

    from frame.config import state_dir
    from frame.daemon.store.database import Store
    from frame.redact import redact_deep

    folder = state_dir(config)
    store = Store.open_read_only(folder)  # a status never creates the store (nor its folder)
    if store is None:
        return {"state": "daemon not running", "shown": None, "renders": [], "feeds": [], "queued_prompts": 0,
                "notice": f"no picture store yet in {folder} (the daemon creates it at its first start)"}
    try:
        shown = store.last_shown()
        return redact_deep({"state": "daemon not running", "shown": shown.to_json() if shown else None,
                            "renders": [render.to_json() for render in store.renders(3)],
                            "feeds": [feed.to_json() for feed in store.feed_health()],
                            "queued_prompts": len(store.queued_prompts())})
    except sqlite3.Error as exc:
        raise FrameError(f"could not read the picture store {store.path}: {exc}") from exc
    finally:
        store.close()


def _describe(status: dict[str, Any]) -> str:
    lines = [f"state: {status.get('state')}"]
    render = status.get("render")
    if render:
        step = f" step {render.get('step')}/{render.get('steps')}" if render.get("steps") else ""
        eta = f", about {render['eta_seconds']:.0f} s left" if render.get("eta_seconds") is not None else ""
        lines.append(f"render {render['id']}: {render.get('stage')}{step}{eta}")
    shown = status.get("shown")
    lines.append(f"showing: picture {shown['picture_id']} ({shown.get('reason')})" if shown else "showing: nothing")
    if status.get("notice"):
        lines.append(f"notice: {status['notice']}")
        if status.get("notice_details"):
            lines.append(f"  details: {status['notice_details']}")
    for job, when in (status.get("next_runs") or {}).items():
        lines.append(f"next {job}: {when}")
    for feed in status.get("feeds") or []:
        health = "ok" if not feed["last_error"] else f"failing ({feed['last_error']})"
        lines.append(f"feed {feed['name']}: {feed['items']} prompts, {health}")
    for render in status.get("renders") or []:  # offline status: the last renders from the store
        error = f" ({render['error']})" if render.get("error") else ""
        lines.append(f"render {render['id']} ({render['kind']}, started {render['started_at']}): "
                     f"{render['status']}{error}")
    lines.append(f"queued prompts: {status.get('queued_prompts', 0)}")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    from frame.cli.client import DaemonNotRunning

    config = _config(args)
    try:
        status = _client(config).request("GET", "/api/status")
    except (DaemonNotRunning, NoOwnerToken):  # no token: the daemon has never run on this state folder
        status = _status_offline(config)
    print(json.dumps(status, indent=2, default=str) if args.json else _describe(status))
    return 0


THUMBS = {"+1": 1, "like": 1, "liked": 1, "-1": -1, "dislike": -1, "disliked": -1}


def parse_rating(text: str) -> dict[str, int]:
    """``+1``/``like`` and ``-1``/``dislike`` are thumbs; ``1``..``5`` are stars."""
    word = text.strip().lower()
    if word in THUMBS:
        return {"rating": THUMBS[word]}
    if word in ("1", "2", "3", "4", "5"):
        return {"stars": int(word)}
    raise UsageError(f"rating must be like (+1), dislike (-1) or 1..5 stars, got {text!r}")


def describe_rating(body: dict[str, int], stream: Any = None) -> str:
    """What a rating says, so ``1`` (one star: disliked) is not taken for ``+1`` (liked): the stars
    drawn out, or the thumb, and what the taste model learns from it (4-5 stars liked, 3 neutral)."""
    if "rating" in body:
        return "liked (+1): more pictures like it" if body["rating"] > 0 else "disliked (-1): fewer pictures like it"
    stars = body["stars"]
    meaning = {5: "liked", 4: "liked", 3: "neutral"}.get(stars, "disliked")
    effect = {"liked": "more pictures like it", "neutral": "neither more nor fewer like it",
              "disliked": "fewer pictures like it"}[meaning]
    drawn = "★" * stars + "☆" * (5 - stars)
    encoding = getattr(stream or sys.stdout, "encoding", None) or "ascii"
    try:
        drawn.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        drawn = "*" * stars + "." * (5 - stars)
    return f"{drawn} {stars} of 5 stars = {meaning}: {effect}"


def cmd_rate(args: argparse.Namespace) -> int:
    body = parse_rating(args.rating)
    picture = _client(_config(args)).request("POST", f"/api/pictures/{args.id}/rating", body)
    favourite = "; a favourite, shown when a night has no new picture" if picture.get("favourite") else ""
    print(f"picture {args.id}: {describe_rating(body)}{favourite}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete a picture through the API, after a y/N question on a terminal (``--yes`` skips it)."""
    client = _client(_config(args))
    picture = client.request("GET", f"/api/pictures/{args.id}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"delete: picture {args.id} would be gone for good; add --yes to delete without asking")
        what = "photo" if picture.get("origin") == "upload" else "picture"
        answer = input(f"Delete {what} {args.id} ({picture.get('prompt', '')!r}) from the frame for good? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print(f"picture {args.id} kept")
            return 1
    result = client.request("DELETE", f"/api/pictures/{args.id}")
    kept = "; its rating stays: the frame keeps learning your taste from it" if result.get("rating_kept") else ""
    print(f"deleted picture {args.id}{kept}")
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
    client = _client(_config(args))
    for line in queue_cli.run(args, client):
        print(line)
    return 0


def cmd_render_now(args: argparse.Namespace) -> int:
    result = _client(_config(args)).request("POST", "/api/render")
    print(f"render {result['render_id']} started; follow it with 'frame status'")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from frame.config import state_dir
    from frame.daemon.http.token import ensure_token

    config = _config(args)
    if args.pair:
        from frame.cli.pair import pairing_lines

        print("\n".join(pairing_lines(config, with_qr=not args.no_qr)))
        return 0
    print(ensure_token(config.web.token, state_dir(config)))
    return 0


def cmd_install_service(args: argparse.Namespace) -> int:
    from frame.daemon.unit import UNIT_PATH, unit_for_this_install

    text = unit_for_this_install(args.user, args.config)
    if args.print:
        sys.stdout.write(text)
        return 0
    target = args.output or UNIT_PATH
    try:
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    except PermissionError:
        raise FrameError(f"cannot write {target}: run with sudo, or use --print and copy it yourself") from None
    except OSError as exc:
        raise FrameError(f"cannot write {target}: {exc.strerror}") from None
    print(f"wrote {target}. Next steps:\n"
          f"  sudo useradd --system --user-group --groups spi,gpio --home-dir /var/lib/frame {args.user}\n"
          "  sudo systemctl daemon-reload && sudo systemctl enable --now frame\n"
          "  journalctl -u frame -f")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run", help="run the daemon: nightly render, feeds, API (what systemd starts)",
        description="Run the frame's daemon in the foreground: it paints a picture every night on the schedule, "
                    "fetches the prompt feeds, shows pictures on the panel and serves the phone page and the JSON "
                    "API on web.listen. systemd starts it (frame install-service); stop it with Ctrl-C.")
    run.set_defaults(func=cmd_run)
    status = subparsers.add_parser(
        "status", help="what is shown, render progress, next runs, feed health",
        description="Ask the running daemon what the panel shows, how a render is going, when the next renders "
                    "and shows are and how the prompt feeds did. Without a daemon it reads the picture store "
                    "(never creating it).")
    status.add_argument("--json", action="store_true", help="print the raw status as JSON")
    status.set_defaults(func=cmd_status)
    rate = subparsers.add_parser("rate", help="rate a picture: like / dislike (+1 / -1) or 1..5 stars")
    rate.add_argument("id", type=int, help="picture id (see 'frame status' or the web page)")
    rate.add_argument("rating", help="like or +1, dislike or -1, or 1..5 stars (4-5 = liked, 3 = neutral, "
                                     "1-2 = disliked)")
    rate.set_defaults(func=cmd_rate)
    delete = subparsers.add_parser("delete", help="delete a picture or uploaded photo and its files (not the one "
                                                 "on the panel)")
    delete.add_argument("id", type=int, help="picture id (see the web page or /api/pictures)")
    delete.add_argument("--yes", action="store_true", help="do not ask first")
    delete.set_defaults(func=cmd_delete)
    queue = subparsers.add_parser("queue", help="queue a prompt for the next render; list, edit, move or remove "
                                               "queued ones")
    queue_cli.add_arguments(queue)
    queue.set_defaults(func=cmd_queue)
    render = subparsers.add_parser(
        "render-now", help="start a render now (one at a time)",
        description="Ask the running daemon to paint a new picture now, outside the schedule, and show it when "
                    "done. Refused while a render runs. Follow it with 'frame status' or the phone page.")
    render.set_defaults(func=cmd_render_now)
    token = subparsers.add_parser(
        "token", help="print the owner token (generated at first use, mode 0600)",
        description="Print the owner token: the password of the phone page and the API (web.token, else the one "
                    "the daemon generated in the state folder at first use, mode 0600). With --pair: a one-time "
                    "link, QR code and short code that log one phone in instead (for 10 minutes, once).")
    token.add_argument("--pair", action="store_true",
                       help="print a one-time pairing link, its QR code and a short code for the phone's login page")
    token.add_argument("--no-qr", action="store_true", help="with --pair: leave out the QR code")
    token.set_defaults(func=cmd_token)
    install = subparsers.add_parser("install-service", help="write the systemd unit for this installation")
    install.add_argument("--user", default="frame", help="system user the daemon runs as (default: frame)")
    install.add_argument("--output", help="where to write the unit (default: /etc/systemd/system/frame.service)")
    install.add_argument("--print", action="store_true", help="print the unit instead of writing it")
    install.set_defaults(func=cmd_install_service)
