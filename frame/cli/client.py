"""Talking to the running daemon's API from the CLI (``frame status``, ``rate``, ``queue``,
``render-now``): URL from ``web.listen``, token from ``web.token`` or the token file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from frame.errors import FrameError, UsageError
from frame.net.server import split_listen

if TYPE_CHECKING:
    from frame.config.schema import Config

TIMEOUT_SECONDS = 5.0
# Answers that mean the request itself was wrong (bad prompt, no such picture, too large): exit 2.
BAD_REQUEST_STATUSES = (400, 404, 413, 422)


class DaemonNotRunning(FrameError):
    """Nothing answers at the configured address."""


def config_note(config_arg: str | None, config: Config, environ: Mapping[str, str] | None = None) -> str | None:
    """The warning for a client command that found no configuration file: it reads the built-in
    defaults' state folder (the token, the store) and daemon address, which are not those of a daemon
    started with ``--config`` (``frame demo``'s, say). Such a command once read another state folder
    without a word. None when a file was given or found."""
    import os

    from frame.config import environment, state_dir
    from frame.config.loader import SYSTEM_CONFIG, config_file_path

    if config_file_path(config_arg, os.environ if environ is None else environ) is not None:
        return None
    return (f"frame: note: no configuration file (--config FILE, ${environment.CONFIG_FILE} or {SYSTEM_CONFIG}), "
            f"so this reads the state folder {state_dir(config)} and the daemon at {base_url(config.web.listen)}; "
            "give the --config the daemon was started with if it is another")


def base_url(listen: str) -> str:
    """Where a local client reaches the daemon: a wildcard bind address means this machine."""
    host, port = split_listen(listen)
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


class Client:
    def __init__(self, config: Config, token: str | None = None) -> None:
        self.url = base_url(config.web.listen)
        self.token = token

    def request(self, method: str, path: str, body: dict | None = None) -> Any:
        import requests

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = requests.request(method, self.url + path, json=body, headers=headers,
                                        timeout=TIMEOUT_SECONDS)
        except requests.ConnectionError:
            raise DaemonNotRunning(
                f"the frame daemon is not running (nothing answers at {self.url}); start it with "
                "'frame run' or 'sudo systemctl start frame'") from None
        except requests.RequestException as exc:
            raise FrameError(f"talking to the daemon at {self.url} failed: {exc}") from None
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text[:200]}
        if response.status_code == 401:
            raise FrameError("the daemon refused the token; check web.token or the token file ('frame token')")
        if response.status_code >= 400:
            error = UsageError if response.status_code in BAD_REQUEST_STATUSES else FrameError
            raise error(f"the daemon said: {data.get('error', response.status_code)}")
        return data
