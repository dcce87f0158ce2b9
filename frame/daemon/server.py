"""Serving the Flask app with waitress (a production WSGI server, pure Python, no C build on the Pi) in
a background thread of the daemon, on ``web.listen``."""

from __future__ import annotations

import logging
import threading
from typing import Any

from frame.errors import FrameError

log = logging.getLogger(__name__)

# How long waitress's socket loop sleeps in select() when nothing happens. waitress reads this setting
# as an int: 0.5 became 0, a zero-timeout poll that kept one core busy forever. 1 s also bounds how
# long close() waits for the loop to notice.
LOOP_TIMEOUT_SECONDS = 1


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


class HttpServer:
    """A waitress server running in a daemon thread; ``close()`` stops it."""

    def __init__(self, app: Any, listen: str, threads: int = 4) -> None:
        from waitress.server import create_server

        host, port = split_listen(listen)
        try:
            self._server = create_server(app, host=host, port=port, threads=threads, ident="frame",
                                         asyncore_loop_timeout=LOOP_TIMEOUT_SECONDS, clear_untrusted_proxy_headers=True)
        except OSError as exc:
            raise FrameError(f"cannot listen on {listen} (web.listen): {exc.strerror or exc}") from exc
        self._closing = False
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
        log.info("API listening on http://%s:%d/api/status", self._server.effective_host, self.port)

    def close(self, timeout: float = 2.0) -> None:
        self._closing = True
        self._server.close()
        self._server.task_dispatcher.shutdown(timeout=timeout)
        self._thread.join(timeout=timeout)
