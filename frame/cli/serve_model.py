"""``frame serve-model FOLDER [--listen HOST:PORT] [--token TOKEN | --token-file FILE]``.

Serves a model folder (a diffusers ONNX export, a converted one, or an OnnxStream folder) to frames
on the network, read-only, with the range requests frame streams weights with. Meant for a NAS or a
desktop that keeps the models; the frame's ``model.source`` then points at the printed URL.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from frame.errors import UsageError

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "0.0.0.0:8090"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve-model", help="serve a model folder over HTTP (with range requests) to frames on the network",
        description="Serve FOLDER read-only over HTTP with range requests, keep-alive, ETag and If-Range, for "
                    "frames that stream their model from this machine. Paths outside FOLDER (also through "
                    "symlinks) are refused. With a token every request must carry it (model.token on the "
                    "frame, or https://frame:TOKEN@host:port/ as model.source). Stop with Ctrl-C.")
    parser.add_argument("folder", metavar="FOLDER", help="the model folder to serve")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"address to listen on (default {DEFAULT_LISTEN}: every interface)")
    token = parser.add_mutually_exclusive_group()
    token.add_argument("--token", metavar="TOKEN", help="require this bearer token (visible in 'ps': prefer "
                       "--token-file or $FRAME_SERVE_MODEL_TOKEN)")
    token.add_argument("--token-file", metavar="FILE", help="require the token stored in FILE")
    parser.add_argument("--threads", type=int, default=4, help="worker threads (default 4)")
    parser.set_defaults(func=serve_model_command)


def read_token(args: argparse.Namespace) -> str:
    """The token from --token, --token-file or $FRAME_SERVE_MODEL_TOKEN ("" = none)."""
    from frame.config.checks import bearer_token

    if args.token_file:
        try:
            value = open(args.token_file, encoding="utf-8").read().strip()
        except OSError as exc:
            raise UsageError(f"serve-model: cannot read --token-file {args.token_file}: {exc.strerror}") from exc
    else:
        value = args.token if args.token is not None else os.environ.get("FRAME_SERVE_MODEL_TOKEN", "")
    problem = bearer_token(value) or ("must be at least 12 characters" if 0 < len(value) < 12 else None)
    if problem:
        raise UsageError(f"serve-model: the token {problem}")
    return value


def serve_model_command(args: argparse.Namespace) -> int:
    from frame.net.server import HttpServer
    from frame.serve.model.app import ModelServerApp

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:  # port 0: any free port (printed below)
        raise UsageError(f"serve-model: --listen must be HOST:PORT like {DEFAULT_LISTEN}, got {args.listen!r}")
    if not os.path.isdir(args.folder):
        raise UsageError(f"serve-model: {args.folder} is not a folder")
    token = read_token(args)
    server = HttpServer(ModelServerApp(args.folder, token), args.listen, threads=args.threads, max_body=0,
                        announce="model server listening on %s:%d", listen_option="--listen")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    shown = "<this machine's address>" if host in ("0.0.0.0", "::", "[::]") else host
    print(f"serving {os.path.abspath(args.folder)} read-only on http://{shown}:{server.port}/", flush=True)
    print(f"on the frame: model.source: http://{shown}:{server.port}/"
          + ("  and model.token: the token you chose" if token else "  (no token: anyone on the network can read it)"),
          flush=True)
    try:
        stop.wait()
    finally:
        server.close()
    return 0
