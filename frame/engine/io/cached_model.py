"""Painting from the weight cache while the model server is off (``model.cache``).

A cached model used to need its server every night all the same: for each file one small Range
request learned its validator (which version of the weights to read), the .onnx structure was scanned
over HTTP again, and with the NAS switched off the render failed although every weight was on the SD
card. Now:

* **the version**: ``validator`` asks the server as before; when it cannot be reached and the cache
  holds a version of the file, that version is used after *one* quick attempt (no retries: there is
  something to fall back on) and a warning says so. An origin found unreachable is not asked again
  for ``UNREACHABLE_SECONDS``, so the night's other files do not each wait for a timeout.
* **the structure**: the scanned .onnx structure (the graph without its weight bytes, and where each
  weight lies) is kept in the version's folder (``structure.json``, checksummed) and read from there.

Anything not in the cache still comes from the server with the usual retries, and fails naming the
file when it cannot; the version check keeps a night from mixing two versions of a file.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from urllib.parse import urlsplit

from frame.engine.errors import ServerUnreachable
from frame.engine.io.protobuf_index import ByteRange, ScannedModel
from frame.engine.io.weight_cache import WeightCache
from frame.redact import redact_url
from frame.statefile import read_json, write_json

log = logging.getLogger(__name__)

STRUCTURE_FILE = "structure.json"
# the graph without its weights, base64 in JSON: SDXL's UNet about 3 MB; a bigger file is not read
STRUCTURE_MAX_BYTES = 64 << 20
UNREACHABLE_SECONDS = 120.0
_unreachable: dict[str, float] = {}  # origin -> monotonic time it was found unreachable
_lock = threading.Lock()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def _known_unreachable(url: str) -> bool:
    with _lock:
        since = _unreachable.get(_origin(url))
        return since is not None and time.monotonic() - since < UNREACHABLE_SECONDS


def _note_unreachable(url: str, reachable: bool) -> None:
    with _lock:
        if reachable:
            _unreachable.pop(_origin(url), None)
        else:
            _unreachable[_origin(url)] = time.monotonic()


def validator(cache: WeightCache, source) -> str:
    """The version of ``source`` (an ``HttpSource``) to read: its server's answer, or while the server
    cannot be reached the one this cache last learned (then ``source`` holds it too, so a weight that
    must still come from the server is checked against it)."""
    if source.validator is not None:
        return source.validator
    remembered = cache.remembered_validator(source.url)
    if remembered is None:
        source.size()  # nothing to fall back on: the usual retries
        cache.remember_validator(source.url, source.validator)
        return source.validator
    if not _known_unreachable(source.url):
        quick = type(source)(source.url, source.settings, source.stats, retries=0)
        try:
            quick.size()
        except ServerUnreachable as exc:
            _note_unreachable(source.url, False)
            log.warning("%s: the model server cannot be reached (%s); using the copy in the weight cache",
                        source.location, exc)
        else:
            _note_unreachable(source.url, True)
            source.validator = quick.validator
            cache.remember_validator(source.url, quick.validator)
            return quick.validator
        finally:
            quick.close()
    log.info("%s: read from the weight cache (server unreachable)", source.location)
    source.validator = remembered
    return remembered


def load_structure(cache: WeightCache, url: str, version: str) -> ScannedModel | None:
    """The scanned structure of this version of ``url`` kept by ``store_structure``, or None."""
    try:
        data = read_json(cache.version_folder(url, version) / STRUCTURE_FILE, max_bytes=STRUCTURE_MAX_BYTES)
    except OSError:  # a cache folder that cannot be read (a file in its place): scan the server's copy
        return None
    if not isinstance(data, dict):
        return None
    try:
        ranges = {int(k): {name: ByteRange(*span) for name, span in graph.items()}
                  for k, graph in data["graphs"].items()}
        scanned = ScannedModel(base64.b64decode(data["structure"]), ranges.pop(0, {}), ranges)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("weight cache: the kept structure of %s is unusable (%s); scanning again", redact_url(url), exc)
        return None
    log.info("%s: structure read from the weight cache", redact_url(url))
    return scanned


def store_structure(cache: WeightCache, url: str, version: str, scanned: ScannedModel) -> None:
    """Keep the scanned structure beside the version's weights (small: the graph without weights)."""
    graphs = {0: scanned.embedded, **scanned.subgraph_embedded}
    data = {"structure": base64.b64encode(scanned.structure).decode("ascii"),
            "graphs": {str(k): {name: [r.offset, r.length] for name, r in graph.items()}
                       for k, graph in graphs.items()}}
    try:
        write_json(cache.version_folder(url, version, create=True) / STRUCTURE_FILE, data)
    except OSError as exc:
        log.warning("weight cache: cannot keep the structure of %s (%s)", redact_url(url), exc.strerror or exc)
