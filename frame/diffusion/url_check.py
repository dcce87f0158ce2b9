"""What ``frame config check`` says about a model URL: is the server there, and does it serve ranges?

Two quick requests, each with a 5 s timeout, its headers complete within 6 s however slowly they
trickle, and no retries (a check must answer now, not in ten minutes): a HEAD of ``model_index.json`` (for an
OnnxStream folder, of its tokenizer's ``vocab.txt``) and a one-byte Range request on the UNet's
weights (OnnxStream: on that ``vocab.txt``). An unreachable server, a refusal, a missing file or a
server that ignores ranges is a warning that names the fix; the configuration itself stays valid (the
NAS may simply be asleep while you check). URLs are shown redacted.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urljoin

import requests

from frame.engine.io.fetch_stats import format_bytes
from frame.engine.io.http import SERVERS_THAT_WORK
from frame.engine.io.http_settings import HttpSettings
from frame.net.deadline import Deadline, DeadlineSession
from frame.redact import redact_url

PROBE_TIMEOUT = 5.0
DEADLINE_SLACK = 1.0  # the whole answer's headers: the probe's timeout plus this (a silent server trips the timeout)
UNET_WEIGHTS = ("unet/model.onnx_data", "unet/model.onnx")
ONNXSTREAM_MARKERS = ("tokenizer/vocab.txt", "sdxl_tokenizer/vocab.txt")  # range support is the server's:
# for an OnnxStream folder (one small file per weight) any of its files shows it
UNREACHABLE_FIX = ("is it switched on, and is the address right? The folder can be served with "
                   f"{SERVERS_THAT_WORK}")


class _Unreachable(Exception):
    pass


def _request(method: str, url: str, settings: HttpSettings, headers: dict | None = None):
    """One request whose answer's headers must all arrive within PROBE_TIMEOUT + DEADLINE_SLACK (a server
    dribbling them a byte at a time never trips the per-read timeout alone; ``frame.net.deadline`` cuts
    it)."""
    session = DeadlineSession()
    try:
        with Deadline(PROBE_TIMEOUT + DEADLINE_SLACK) as deadline:
            response = session.request(method, url, headers={**settings.headers_for(url), **(headers or {})},
                                       timeout=PROBE_TIMEOUT, stream=True, allow_redirects=True)
            response.close()  # a server without ranges would send the whole file: never read it
            if deadline.expired:  # headers cut short by the deadline read like complete ones
                raise requests.Timeout()
    except requests.RequestException as exc:
        raise _Unreachable("its answer did not arrive in time" if deadline.expired else type(exc).__name__) from None
    finally:
        session.close()
    return response


def check_model_url(source: str, settings: HttpSettings | None = None) -> Iterator[tuple[str, str]]:
    """(level, line) pairs for an http(s) ``model.source``; level is "info" or "warning"."""
    settings = settings or HttpSettings()
    base = source if source.endswith("/") else source + "/"
    shown = redact_url(base)
    try:
        index = _request("HEAD", urljoin(base, "model_index.json"), settings)
        if index.status_code in (401, 403):
            yield "warning", (f"the model server at {shown} refused access (HTTP {index.status_code}): set "
                              "model.token (frame serve-model --token) or put user:password@ in model.source")
            return
        weights = yield from _weights_to_probe(base, shown, index.status_code, settings)
        if weights is None:
            return
        yield from _range_probe(base, weights, settings)
    except _Unreachable as exc:
        yield "warning", (f"cannot reach the model server at {shown} within {PROBE_TIMEOUT:.0f} s ({exc}): "
                          f"{UNREACHABLE_FIX}")


def _weights_to_probe(base: str, shown: str, index_status: int, settings: HttpSettings):
    """The UNet weights file to range-probe (a generator returning it), or None after a warning."""
    if index_status == 200:
        for relative in UNET_WEIGHTS:
            if _request("HEAD", urljoin(base, relative), settings).status_code == 200:
                return relative
        yield "warning", f"{shown} has model_index.json but no unet/model.onnx: is it a complete diffusers ONNX export?"
        return None
    if index_status != 404:
        yield "warning", f"{shown}model_index.json: the model server answered HTTP {index_status}: {UNREACHABLE_FIX}"
        return None
    for marker in ONNXSTREAM_MARKERS:
        if _request("HEAD", urljoin(base, marker), settings).status_code == 200:
            return marker
    yield "warning", (f"{shown} is neither a diffusers ONNX export (no model_index.json) nor an OnnxStream "
                      "model folder (no tokenizer/vocab.txt): check the URL")
    return None


def _range_probe(base: str, relative: str, settings: HttpSettings) -> Iterator[tuple[str, str]]:
    url = urljoin(base, relative)
    answer = _request("GET", url, settings, {"Range": "bytes=0-0", "Accept-Encoding": "identity"})
    if answer.status_code == 206:
        total = answer.headers.get("Content-Range", "").rpartition("/")[2]
        size = f", {format_bytes(int(total))}" if total.isdigit() else ""
        yield "info", f"the model server answers and serves range requests ({relative}{size})"
    elif answer.status_code == 200:
        yield "warning", (f"{redact_url(url)}: the server ignores range requests (answered 200 with the whole file "
                          f"instead of 206); frame streams weights and needs {SERVERS_THAT_WORK}")
    else:
        yield "warning", f"{redact_url(url)}: the model server answered HTTP {answer.status_code} to a range request"
