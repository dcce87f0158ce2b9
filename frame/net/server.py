"""Serving the Flask app with waitress (a production WSGI server, pure Python, no C build on the Pi) in
a background thread of the daemon, on ``web.listen``."""

from __future__ import annotations

import logging
import threading
from typing import Any

from frame.errors import FrameError
from frame.net.bodylimit import BODY_POLICY_KEY, RECV_SLACK, TOO_LARGE_PAGE_KEY, BodyPolicy, install
from frame.net.connguard import create_guarded_server

log = logging.getLogger(__name__)

# How long waitress's socket loop sleeps in select() when nothing happens. waitress reads this setting
# as an int: 0.5 became 0, a zero-timeout poll that kept one core busy forever. close() wakes the loop
# rather than waiting for this timeout.
LOOP_TIMEOUT_SECONDS = 1
# Request headers are kept in memory while they arrive; browsers and the CLI send well under this.
MAX_HEADER_BYTES = 32 * 1024


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


class HttpServer:
    """A waitress server running in a daemon thread; ``close()`` stops it.

    Request bodies are capped at the server, before any application code, authentication included,
    sees them: ``max_body`` defaults to the Flask app's ``MAX_CONTENT_LENGTH``. A larger declared
    ``Content-Length`` is answered 413 from the headers alone, a chunked body is cut off when it passes
    the cap, and every body accepted under the default cap fits waitress's in-memory buffer, so no
    client can make the frame write request bodies to its SD card (waitress otherwise spools up to
    1 GiB per request to /tmp). Only a body a policy admits (the owner's photo) is spooled.

    ``listen_option`` names where ``listen`` came from in the error for a busy port (``--listen`` for
    ``frame serve-model``). ``announce`` is the log line once it listens: a URL that answers.

    ``body_policy`` (default: the app's ``extensions[BODY_POLICY_KEY]``, which the phone pages set for
    the photo upload) may raise the cap for one request from its headers alone (``bodylimit``), and
    the app's ``extensions[TOO_LARGE_PAGE_KEY]`` answers a refused body in its own words.
    """

    def __init__(self, app: Any, listen: str, threads: int = 4, max_body: int | None = None,
                 announce: str = "API listening on http://%s:%d/api/status",
                 body_policy: BodyPolicy | None = None, listen_option: str = "web.listen") -> None:
        if max_body is None:
            max_body = int(getattr(app, "config", {}).get("MAX_CONTENT_LENGTH") or 64 * 1024)
        if body_policy is None:
            body_policy = getattr(app, "extensions", {}).get(BODY_POLICY_KEY)
        host, port = split_listen(listen)
        try:
            # waitress refuses bodies of max_request_body_size bytes or more, so +1 admits max_body.
            # A chunked body is checked after each socket read (recv_bytes, 8 KiB), so it can overshoot
            # the cap by one read: the in-memory limit (inbuf_overflow) leaves room for that.
            self._server = create_guarded_server(app, host, port, threads=threads, ident="frame",
                                                 asyncore_loop_timeout=LOOP_TIMEOUT_SECONDS,
                                                 max_request_body_size=max_body + 1,
                                                 inbuf_overflow=max_body + RECV_SLACK,
                                                 max_request_header_size=MAX_HEADER_BYTES,
                                                 clear_untrusted_proxy_headers=True)
        except OSError as exc:
            raise FrameError(f"cannot listen on {listen} ({listen_option}): {exc.strerror or exc}") from exc
        too_large = getattr(app, "extensions", {}).get(TOO_LARGE_PAGE_KEY)
        if body_policy is not None or too_large is not None:
            install(self._server, body_policy, too_large)
        self._closing = False
        self._announce = announce
        self._thread = threading.Thread(target=self._serve, name="http", daemon=True)

    def _serve(self) -> None:
        try:
            self._server.run()
        except OSError:
            if not self._closing:  # a select() on the sockets close() just closed is expected
                raise

    @property
    def port(self) -> int:
        return int(self._server.effective_port)

    def start(self) -> None:
        self._thread.start()
        log.info(self._announce, self._server.effective_host, self.port)

    def close(self, timeout: float = 2.0) -> None:
        """Stop listening, let running requests finish (up to ``timeout``) and end the loop thread.

        The socket loop sleeps up to ``LOOP_TIMEOUT_SECONDS`` in select(), and closing a socket from
        another thread does not wake it: each close (a daemon's stop, every test's server) waited that
        second. A single listener closes from inside the loop instead, through waitress's trigger (a pipe
        the loop selects on; its callables run in the loop thread), so the loop sees its map empty at
        once."""
        self._closing = True
        closed = threading.Event()
        failed: list[BaseException] = []

        def close_in_loop() -> None:
            try:
                self._server.close()
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread below
                failed.append(exc)
            finally:
                closed.set()

        wake = getattr(self._server, "trigger", None)  # one listener (several: a MultiSocketServer)
        if wake is not None and self._thread.is_alive():
            try:
                wake.pull_trigger(close_in_loop)
            except OSError:  # the trigger is closed already (the loop is ending): close from here
                pass
            else:
                closed.wait(timeout)
        if failed:
            raise failed[0]
        if not closed.is_set():
            self._server.close()
        self._server.task_dispatcher.shutdown(timeout=timeout)
        self._thread.join(timeout=timeout)
