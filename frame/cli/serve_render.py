"""``frame serve-render``: paint other frames' nights on this computer (AUTOMATIC1111 API subset)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frame.config.schema import Config

DEFAULT_LISTEN = "0.0.0.0:7860"  # AUTOMATIC1111's port, so owners type what they know
TOKEN_ENV = "FRAME_SERVE_RENDER_TOKEN"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve-render", help="paint pictures for other frames on this computer (AUTOMATIC1111 API)",
        description="Serve frame's Stable Diffusion pipeline on the network with the AUTOMATIC1111 API subset "
                    "frames use (txt2img, progress, sd-models), one job at a time; other jobs wait. On the "
                    "frames set render.backend: remote, render.remote.url: http://THIS-COMPUTER:7860 and "
                    "render.remote.token. Uses onnxruntime when installed (pip install 'frame[desktop]'), "
                    "else frame's own engine. Stop with Ctrl-C.")
    parser.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                        help=f"address to listen on (default {DEFAULT_LISTEN}: every network interface)")
    parser.add_argument("--token", help=f"the token frames must send (at least 12 characters; default: ${TOKEN_ENV})")
    parser.add_argument("--model", metavar="SRC", help="model folder or http(s) URL (default: model.source)")
    parser.add_argument("--engine", choices=("auto", "frame", "onnxruntime"), default="auto",
                        help="auto (onnxruntime when installed and the model is a local export), frame, onnxruntime")
    parser.add_argument("--queue", type=int, default=8, metavar="N",
                        help="jobs that may wait while one renders (default 8; more are refused with 503)")
    parser.set_defaults(func=serve_command)


def _token(args: argparse.Namespace) -> str:
    from frame.config.checks import token as token_problem
    from frame.errors import UsageError

    token = args.token or os.environ.get(TOKEN_ENV, "")
    if not token:
        raise UsageError(f"frame serve-render needs a token: --token TOKEN or ${TOKEN_ENV} (at least 12 "
                         "characters; put the same in each frame's render.remote.token)")
    problem = token_problem(token)
    if problem:
        raise UsageError(f"--token {problem}")
    return token


def serve_command(args: argparse.Namespace) -> int:
    from frame.config import load_config
    from frame.config.checks import host_port
    from frame.errors import UsageError
    from frame.models import resolve_model_source
    from frame.redact import redact_url

    token = _token(args)
    if host_port(args.listen):
        raise UsageError(f"--listen {host_port(args.listen)}")
    if args.queue < 0:
        raise UsageError("--queue must be 0 or more")
    config = load_config(args.config)
    source = resolve_model_source(args.model or config.model.source)
    server = start_server(source, args.engine, config, token, args.listen, args.queue)
    print(f"frame serve-render: {redact_url(source)} on {server.engine}, listening on {args.listen} "
          f"(port {server.http.port}); Ctrl-C stops", flush=True)
    try:
        server.jobs.serve_forever()  # renders in the main thread (see frame.serve.render.jobs)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


class RenderServer:
    """The pipeline, its job queue and the HTTP server (in its own threads); the caller runs the jobs
    with ``jobs.serve_forever()`` or ``jobs.run_next()`` in its main thread."""

    def __init__(self, pipe: Any, engine: str, model_name: str, token: str, listen: str, max_waiting: int) -> None:
        from frame.net.server import HttpServer
        from frame.serve.render.app import MAX_BODY_BYTES, create_app
        from frame.serve.render.jobs import RenderQueue

        self.pipe, self.engine = pipe, engine
        self.jobs = RenderQueue(pipe, max_waiting)
        app = create_app(pipe, self.jobs, token, model_name)
        # one thread per waiting job, one for the running job's request, two for progress polls
        self.http = HttpServer(app, listen, threads=max_waiting + 3, max_body=MAX_BODY_BYTES, listen_option="--listen",
                               announce="render server listening on http://%s:%d/sdapi/v1/sd-models (A1111 API)")
        self.http.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.port}"

    def close(self) -> None:
        self.http.close()
        self.jobs.close()


def start_server(source: str, engine: str, config: Config, token: str, listen: str,
                 max_waiting: int = 8) -> RenderServer:
    from frame.redact import redact_url
    from frame.serve.render.engines import load_served_pipeline

    pipe, chosen = load_served_pipeline(source, engine, config)
    name = os.path.basename(redact_url(source).rstrip("/")) or "frame"
    return RenderServer(pipe, chosen, name, token, listen, max_waiting)
