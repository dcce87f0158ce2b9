"""Small model files over HTTP (model_index.json, configs, tokenizer files, OnnxStream's model.txt):
whole, uncompressed, capped in size, and with one wall-clock deadline per file.

The weights stream through ``HttpSource`` in ranges of known length; these files are read whole, and
a model server (or whatever answers at its address) decides how much it sends and how fast. Three
things a hostile or broken server did to ``frame config check`` and the render worker, and what stops
each:

* a gzip bomb (1 GiB that compresses to 1 MB, ``Content-Encoding: gzip``) took 2.2 GB of memory,
  because requests decodes compressed bodies: frame asks for ``Accept-Encoding: identity``, reads the
  raw bytes without decoding, and refuses an answer that is compressed anyway;
* a body of any size was read into memory: each file is capped at ``MAX_BYTES`` (16 MiB; the largest
  real one, an SD 1.5 UNet's OnnxStream model.txt, is under 1 MiB, a CLIP vocab.json 1 MiB), refused
  from its Content-Length when it declares one, else as soon as the bytes read pass the cap;
* one byte every 5 s never trips a per-read timeout, so a fetch could hang for hours: the whole fetch
  of one file — connecting, every retry, every byte — must end within ``model.http_give_up_seconds``
  (``frame.net.deadline`` shuts its sockets when that passes).
"""

from __future__ import annotations

import requests

from frame.engine.errors import WeightFetchError
from frame.engine.io.http import Transient, connection_problem, refusal, transient_errors, with_retries
from frame.engine.io.http_settings import HttpSettings
from frame.errors import FrameError
from frame.net.deadline import Deadline, DeadlinePassed, DeadlineSession

MAX_BYTES = 16 << 20
READ_BYTES = 64 << 10
SETTING = "model.http_give_up_seconds"


def fetch_small(url: str, settings: HttpSettings, shown: str, max_bytes: int = MAX_BYTES) -> bytes | None:
    """The whole body of ``url`` (``shown`` is its redacted form for messages), or None when the server
    answers 404. Connection problems and 5xx/429 are retried as for weights, within one deadline of
    ``settings.give_up_seconds`` for the whole fetch; a refusal, a compressed or oversized answer or the
    deadline passing is a ``WeightFetchError`` naming the file."""
    session = DeadlineSession()
    try:
        with Deadline(settings.give_up_seconds, setting=SETTING) as deadline:
            try:
                return with_retries(settings, shown, lambda: _attempt(session, url, settings, shown, max_bytes,
                                                                      deadline))
            except DeadlinePassed:
                raise WeightFetchError(f"{shown}: {deadline.message}") from None
    finally:
        session.close()


def _attempt(session: requests.Session, url: str, settings: HttpSettings, shown: str, max_bytes: int,
             deadline: Deadline) -> bytes | None:
    deadline.check()
    headers = {"Accept-Encoding": "identity", **settings.headers_for(url)}
    try:
        with session.get(url, headers=headers, stream=True, timeout=settings.timeout) as response:
            if response.status_code == 404:
                return None
            _check_status(response.status_code, shown, response.headers.get("Retry-After"))
            _check_headers(response.headers, shown, max_bytes)
            body = _read_capped(response, shown, max_bytes)
            deadline.check()  # a close-delimited body cut by the deadline ends like a complete one
            return body
    except transient_errors() as exc:
        deadline.check()  # a socket the deadline shut: say so, not "connection reset"
        raise connection_problem(exc) from exc


def _check_status(status: int, shown: str, retry_after: str | None) -> None:
    if status >= 500 or status == 429:
        raise Transient(f"HTTP {status}")
    if status in (401, 403):
        raise refusal(status, shown)
    if status != 200:
        raise FrameError(f"cannot fetch {shown}: HTTP {status}")


def _check_headers(headers, shown: str, max_bytes: int) -> None:  # noqa: ANN001 - requests' header dict
    encoding = headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise WeightFetchError(f"{shown}: the server sent it compressed (Content-Encoding: {encoding[:40]}) "
                               "although frame asked for it uncompressed; frame does not unpack model files "
                               "(turn compression off for the model folder on the server)")
    declared = headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise WeightFetchError(f"{shown}: the server announces {int(declared)} bytes; a model's small files "
                               f"are at most {max_bytes >> 20} MiB, so this is not one (wrong URL?)")


def _read_capped(response: requests.Response, shown: str, max_bytes: int) -> bytes:
    chunks, total = [], 0
    while True:
        chunk = response.raw.read(READ_BYTES, decode_content=False)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:
            raise WeightFetchError(f"{shown}: the server sent more than {max_bytes >> 20} MiB; a model's "
                                   "small files are never that large, so this is not one (wrong URL?)")
        chunks.append(chunk)
