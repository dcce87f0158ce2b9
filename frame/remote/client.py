"""HTTP to a render server (AUTOMATIC1111-compatible or ComfyUI): auth, deadlines, and failures
sorted into reasons.

Deadlines. Every call runs under one wall-clock ``Deadline`` (``frame.net.deadline``: a timer
shuts the call's sockets down when it passes, so a server that drips its headers or body a byte at
a time cannot hold a call past it) plus a connect timeout. The job's POST gets what is left of the
job's deadline; the other calls get a few seconds.

Auth. ``token`` is sent as ``Authorization: Bearer``; ``user``/``password`` as HTTP basic auth (A1111's
``--api-auth``); credentials in the URL (``http://user:pass@host``) work too. None of them is ever
logged or put into an error message: the server is named by its redacted URL.

Answers are read with a size cap sized for the Pi worker (``MAX_ANSWER_BYTES``: a 1024² picture is
~3 MB of base64, a 2048² one ~16 MB), into one buffer, and JSON is parsed only within a nesting depth
and a count of values (``frame.jsonlimits``: a 60 MB answer of small objects took the worker to
359 MiB, a deeply nested one raised RecursionError); redirects are not followed. ``call`` decodes
JSON; ``raw=True`` returns the body's bytes instead (ComfyUI's ``/view`` picture), ``files=`` sends a
multipart form (ComfyUI's ``/upload/image``).
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from urllib3.exceptions import NameResolutionError, NewConnectionError

from frame import jsonlimits
from frame.net.deadline import Deadline, DeadlinePassed, DeadlineSession
from frame.redact import redact_text, redact_url
from frame.remote import a1111
from frame.remote.errors import AUTH, BAD_RESPONSE, DIED, REFUSED, REJECTED, SERVER_ERROR, TIMEOUT, RemoteUnavailable

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 24 << 20
MAX_ANSWER_DEPTH = 64  # ComfyUI's and A1111's answers nest 6 or so levels
MAX_ANSWER_VALUES = 100_000  # their biggest (a model list, a job's history) hold a few thousand
CHUNK = 64 << 10


class CancellableDeadline(Deadline):
    """A Deadline another thread can end early (the job's watcher, when the server stops answering)."""

    def cancel(self) -> None:
        self._cut()


class A1111Client:
    """One render server. Methods return decoded JSON or raise RemoteUnavailable with a reason."""

    def __init__(self, url: str, user: str = "", password: str = "", token: str = "",
                 connect_timeout: float = 5.0,
                 api_hint: str = "an AUTOMATIC1111-compatible server started with --api") -> None:
        self.base = url.rstrip("/")
        self.api_hint = api_hint  # what a 404 suggests the address is not
        self.server = redact_url(self.base)
        self.connect_timeout = connect_timeout
        self.session = DeadlineSession()
        self.session.trust_env = False  # a LAN server: no proxies or .netrc from the environment
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        elif user or password:
            self.session.auth = (user, password)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> A1111Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def models(self, seconds: float) -> list[str]:
        """The server's checkpoint titles (``GET /sdapi/v1/sd-models``): the reachability check."""
        return a1111.model_titles(self.call("GET", a1111.SD_MODELS, seconds=seconds))

    def progress(self, seconds: float) -> a1111.ProgressSnapshot:
        return a1111.parse_progress(self.call("GET", a1111.PROGRESS, seconds=seconds,
                                              params={"skip_current_image": "false"}))

    def call(self, method: str, path: str, seconds: float, body: Any = None, params: Any = None,
             deadline: Deadline | None = None, started: bool = False, files: Any = None, raw: bool = False) -> Any:
        """``method path`` under a deadline of ``seconds`` (or the given ``deadline``); the decoded JSON
        (``raw``: the body's bytes, for a 2xx answer).

        ``started``: the server already accepted this job, so a dropped connection means it died.
        """
        own = deadline is None
        deadline = deadline or Deadline(seconds)
        if own:
            deadline.__enter__()
        try:
            return self._call(method, path, body, params, deadline, started, files, raw)
        finally:
            if own:
                deadline.__exit__(None, None, None)

    def _call(self, method: str, path: str, body: Any, params: Any, deadline: Deadline, started: bool,
              files: Any = None, raw: bool = False) -> Any:
        try:
            response = self.session.request(method, self.base + path, json=body, params=params, files=files,
                                            stream=True,
                                            allow_redirects=False,
                                            timeout=(self.connect_timeout, max(0.5, deadline.remaining())))
            try:
                status, data = response.status_code, _read_capped(response, deadline)
            finally:
                response.close()
        except RemoteUnavailable as exc:
            raise exc.at(self.server) from None
        except (requests.RequestException, DeadlinePassed, OSError) as exc:
            raise self._failure(exc, path, deadline, started) from None
        if raw and 200 <= status < 300:
            return data
        return self._decode(status, data, path)

    def _failure(self, exc: BaseException, path: str, deadline: Deadline, started: bool) -> RemoteUnavailable:
        """Sort a network failure into a reason (the deadline first: cutting sockets causes errors too)."""
        if deadline.expired or isinstance(exc, DeadlinePassed):
            return RemoteUnavailable(TIMEOUT, f"no complete answer to {path} within {deadline.seconds:g} s",
                                     self.server)
        text = redact_text(str(exc))
        if isinstance(exc, requests.ConnectTimeout):
            return RemoteUnavailable(TIMEOUT, f"could not connect within {self.connect_timeout:g} s", self.server)
        if isinstance(exc, requests.ReadTimeout):
            return RemoteUnavailable(TIMEOUT, f"no answer to {path} within {deadline.seconds:g} s", self.server)
        if isinstance(exc, requests.ConnectionError) and _never_connected(exc):
            return RemoteUnavailable(REFUSED, f"not reachable ({_short_cause(exc, text)})", self.server)
        if started or isinstance(exc, requests.exceptions.ChunkedEncodingError):
            return RemoteUnavailable(DIED, f"the connection broke during {path} ({_short_cause(exc, text)}): "
                                           "the server stopped or crashed mid-job", self.server)
        return RemoteUnavailable(DIED, f"the server closed the connection ({_short_cause(exc, text)})", self.server)

    def _decode(self, status: int, data: bytes | bytearray, path: str) -> Any:
        try:
            decoded = jsonlimits.loads(data, MAX_ANSWER_DEPTH, MAX_ANSWER_VALUES) if data else None
        except jsonlimits.JsonLimitError as exc:
            return _raise(BAD_RESPONSE, f"the answer to {path} is not one frame reads ({exc})", self.server)
        except ValueError:
            decoded = None
        detail = a1111.error_detail(decoded)
        suffix = f": {detail}" if detail else ""
        if status in (401, 403):
            return _raise(AUTH, f"the server refused the credentials (HTTP {status}; check render.remote.user, "
                                "password or token)", self.server)
        if status == 404:
            return _raise(REJECTED, f"no {path} here (HTTP 404): is it {self.api_hint}?", self.server)
        if status >= 500:
            return _raise(SERVER_ERROR, f"server error HTTP {status} on {path}{suffix}", self.server)
        if status >= 300:
            return _raise(REJECTED, f"the server answered HTTP {status} to {path}{suffix}", self.server)
        if decoded is None:
            return _raise(BAD_RESPONSE, f"the answer to {path} is not JSON ({len(data)} bytes)", self.server)
        return decoded


def _raise(reason: str, message: str, server: str) -> Any:
    raise RemoteUnavailable(reason, message, server)


def _read_capped(response: requests.Response, deadline: Deadline) -> bytearray:
    """The body, in one buffer (no list of chunks joined into a second copy), at most MAX_ANSWER_BYTES."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise RemoteUnavailable(BAD_RESPONSE, f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MB")
    data = bytearray()
    for chunk in response.iter_content(CHUNK):
        deadline.check()
        if len(data) + len(chunk) > MAX_ANSWER_BYTES:
            raise RemoteUnavailable(BAD_RESPONSE, f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MB")
        data += chunk
    deadline.check()
    return data


def _never_connected(exc: BaseException) -> bool:
    """True when the TCP connection was never made (refused, unknown host, no route)."""

    seen: set[int] = set()
    stack: list[Any] = [exc]
    while stack:
        item = stack.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, (NewConnectionError, NameResolutionError, ConnectionRefusedError)):
            return True
        stack.extend([getattr(item, "reason", None), item.__cause__, item.__context__,
                      *[a for a in getattr(item, "args", ()) if isinstance(a, BaseException)]])
    return False


def _short_cause(exc: BaseException, text: str) -> str:
    """The innermost readable cause: "Connection refused", "Name or service not known", ..."""
    for needle in ("Connection refused", "Name or service not known", "No route to host", "Network is unreachable",
                   "Connection reset by peer", "Remote end closed connection", "IncompleteRead",
                   "Connection broken", "Temporary failure in name resolution"):
        if needle in text:
            return needle
    return type(exc).__name__
