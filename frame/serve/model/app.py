"""The WSGI application behind ``frame serve-model``: one folder, read-only, with HTTP range requests.

frame streams a model's weights with Range requests, so the server must answer ``Range: bytes=a-b``
with 206 and exactly those bytes. This app leaves the HTTP details to werkzeug's ``send_file``
(already a dependency through flask): single ranges (206 with Content-Range), unsatisfiable or
multi-part ranges (416), If-Range, ETag / If-None-Match, Last-Modified / If-Modified-Since, HEAD.
waitress (also already a dependency) serves it with keep-alive connections.

What it adds is the part that must not be got wrong:

* only files inside FOLDER are served: the request path is split into segments and refused when any
  is ``..``, starts with a dot (``.git``, ``.env``), or holds a backslash or NUL; the joined path is
  then resolved (symlinks followed) and refused unless it is still inside FOLDER. WSGI servers decode
  ``%2e%2e`` before the app sees the path, so encoded traversal meets the same checks; a
  double-encoded one stays a literal file name that does not exist. Directories are not listed.
* only GET and HEAD (405 otherwise); request bodies are not read.
* with a token, every request needs ``Authorization: Bearer TOKEN`` or HTTP basic auth whose password
  is the token (so ``https://frame:TOKEN@nas:8090/`` works as a model URL); compared in constant time.
  Neither the token nor the Authorization header is ever logged. Ten wrong tokens from one address
  within five minutes lock that address out for the rest of the window (429 with ``Retry-After``, the
  daemon's and serve-render's ``FailureLimiter``), so a token cannot be guessed at hundreds a second.
"""

from __future__ import annotations

import base64
import hmac
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, TooManyRequests, Unauthorized
from werkzeug.utils import send_file

from frame.net.ratelimit import FailureLimiter

log = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 20  # file wrapper block size (waitress reads the file in its own, larger, sends)
Environ = dict[str, Any]
StartResponse = Callable[..., Any]


class ModelServerApp:
    """``ModelServerApp(folder, token)`` is a WSGI callable serving ``folder`` read-only."""

    def __init__(self, folder: str | os.PathLike, token: str = "") -> None:
        self.root = Path(os.path.realpath(folder))
        if not self.root.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder")
        self.token = token
        self.limiter = FailureLimiter()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        response, path = self._respond(environ)
        log.debug("%s %s -> %s", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO", ""), response.status_code)
        wrapper = environ.get("wsgi.file_wrapper")
        if path is None or wrapper is None or environ.get("REQUEST_METHOD") != "GET" \
                or response.status_code not in (200, 206):
            return response(environ, start_response)
        return self._file_body(response, path, wrapper, start_response)

    @staticmethod
    def _file_body(response, path: Path, wrapper, start_response: StartResponse) -> Iterable[bytes]:
        """werkzeug's status and headers, but the body as the server's own file wrapper positioned at the
        range's start: waitress then sends Content-Length bytes straight from the file in large blocks,
        instead of werkzeug's range iterator handing it 8 kB at a time (server CPU per GB 1.8-2.3 s)."""
        start = response.content_range.start if response.status_code == 206 else 0
        response.close()  # the file send_file opened
        body = open(path, "rb")
        body.seek(start)
        start_response(response.status, list(response.headers.items()))
        return wrapper(body, BLOCK_BYTES)

    def _respond(self, environ: Environ):
        """The werkzeug response for this request, and the file it serves (None for errors)."""

        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return MethodNotAllowed(valid_methods=["GET", "HEAD"]).get_response(environ), None
        if self.token:
            refused = self._check_token(environ)
            if refused is not None:
                return refused, None
        path = self.resolve(environ.get("PATH_INFO", ""))
        if path is None:
            return NotFound().get_response(environ), None
        try:
            return send_file(str(path), environ, mimetype="application/octet-stream", conditional=True,
                             etag=True, max_age=None), path
        except HTTPException as exc:  # 416 for a range outside the file
            return exc.get_response(environ), None
        except OSError:  # vanished or unreadable between the check and the open
            return NotFound().get_response(environ), None

    def _check_token(self, environ: Environ):
        """None when the request carries the token; else the 401 (counted) or 429 answer."""
        address = environ.get("REMOTE_ADDR") or "?"
        if self.limiter.blocked(address):
            return TooManyRequests("too many wrong tokens from this address; try again later",
                                   retry_after=self.limiter.retry_after(address)).get_response(environ)
        if not self.authorized(environ.get("HTTP_AUTHORIZATION", "")):
            self.limiter.failed(address)
            response = Unauthorized("this model server needs its token").get_response(environ)
            response.headers["WWW-Authenticate"] = 'Bearer realm="frame model", Basic realm="frame model"'
            return response
        self.limiter.succeeded(address)
        return None

    def authorized(self, header: str) -> bool:
        """``Bearer TOKEN``, or ``Basic`` with any user name and TOKEN as the password."""
        scheme, _, value = header.partition(" ")
        scheme, value = scheme.lower(), value.strip()
        if scheme == "bearer":
            offered = value
        elif scheme == "basic":
            try:
                offered = base64.b64decode(value, validate=True).decode("utf-8").partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                return False
        else:
            return False
        return hmac.compare_digest(offered.encode("utf-8"), self.token.encode("utf-8"))

    def resolve(self, path_info: str) -> Path | None:
        """The regular file under the folder that ``path_info`` names, or None (missing or refused)."""
        try:  # WSGI hands the raw path over as latin-1; file names on disk are UTF-8
            path_info = path_info.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return None
        segments = [s for s in path_info.split("/") if s]
        if not segments or any(s == ".." or s.startswith(".") or "\\" in s or "\0" in s for s in segments):
            return None
        candidate = os.path.realpath(os.path.join(self.root, *segments))
        if not candidate.startswith(str(self.root) + os.sep) or not os.path.isfile(candidate):
            return None
        return Path(candidate)
