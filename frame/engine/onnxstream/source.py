"""Where an OnnxStream model is: a folder holding ``model.txt``, that file, or the same over http(s).

``read_structure`` reads model.txt (and ``range_data.txt`` when the folder has one), finds each
weight's ``.bin`` file and builds the engine's structure. Locally, every file is checked before any
compute: missing files are listed together and a file whose size does not match its declared shape
is named. Over HTTP nothing is downloaded ahead: the providers stream each ``.bin`` with range
requests, and one probe per model decides whether conv weights are read from ``_nchw.bin`` or from
``_nhwc.bin`` (all that OnnxStream's own downloader fetches).
"""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import dataclass
from urllib.parse import urlsplit

from frame.engine.errors import EngineError, ModelFormatError, WeightDataError
from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.sources import SourcePool, is_url
from frame.engine.onnxstream.activations import parse_range_data, quantise_activations
from frame.engine.onnxstream.build import Structure, WeightFile, build_structure
from frame.engine.onnxstream.text import parse_model_text
from frame.redact import redact_url

log = logging.getLogger(__name__)

MODEL_TXT = "model.txt"
RANGE_DATA = "range_data.txt"


@dataclass(frozen=True)
class OnnxStreamSource:
    """An OnnxStream model plus how a caller wants its graph I/O (``load_model`` accepts it as a source).

    ``rename`` maps graph input/output names (unescaped) to the names the caller uses;
    ``extra_outputs`` (names after renaming) are values to return although later ops read them
    (OnnxStream's ``m_extra_outputs``); ``range_data`` applies the range_data.txt next to model.txt (W8A8) when
    present; ``weights_folder`` (path or URL) holds the ``.bin`` files when model.txt is elsewhere
    (a local copy of a remote folder's model.txt, so it is not downloaded every night).
    """

    location: str
    rename: tuple[tuple[str, str], ...] = ()
    extra_outputs: tuple[str, ...] = ()
    range_data: bool = True
    weights_folder: str | None = None

    def __str__(self) -> str:
        return self.location


def is_onnxstream_source(source: object) -> bool:
    """A folder holding model.txt, a ``.txt`` file, or a URL to either (a URL ending in ``/``, in
    ``.txt`` or in a path segment without an extension)."""
    if isinstance(source, OnnxStreamSource):
        return True
    text = os.fspath(source) if isinstance(source, os.PathLike) else str(source)
    if is_url(text):
        path = urlsplit(text).path
        last = path.rsplit("/", 1)[-1]
        return path.endswith("/") or last.endswith(".txt") or "." not in last
    if text.endswith(".txt"):
        return True
    return os.path.isdir(text) and os.path.isfile(os.path.join(text, MODEL_TXT))


def model_txt_location(location: str) -> str:
    if location.endswith(".txt"):
        return location
    if is_url(location):
        return location.rstrip("/") + "/" + MODEL_TXT
    return os.path.join(location, MODEL_TXT)


def folder_of(model_txt: str) -> str:
    if is_url(model_txt):
        return model_txt.rsplit("/", 1)[0] + "/"
    return os.path.dirname(os.path.abspath(model_txt))


def join(folder: str, name: str) -> str:
    if posixpath.basename(name) != name or name in ("", ".", ".."):
        raise ModelFormatError(f"weight file name {name!r} points outside the model folder")
    return folder + name if is_url(folder) else os.path.join(folder, name)


def read_text(location: str, pool: SourcePool) -> str:
    """A whole small file (model.txt, range_data.txt) from disk or over HTTP."""
    try:
        source = pool.get(location)
        data = source.read_at(0, source.size())
    except EngineError as exc:
        raise ModelFormatError(f"cannot read {location}: {exc}") from exc
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"{location} is not a text file ({exc})") from exc


class LocalResolver:
    """Finds each weight file in a local folder; missing ones are collected, not raised one by one.

    A weight file may be a symlink, but only to a file inside the folder (after resolving every link):
    one that leads out of it (``../../etc/...``, an absolute path) is refused, as ``frame serve-model``
    refuses it, so a model folder copied from elsewhere cannot make the frame read other files."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.root = os.path.realpath(folder)
        self.missing: list[str] = []
        self.outside: list[str] = []

    def __call__(self, file_name: str) -> WeightFile:
        path = join(self.folder, file_name)
        if os.path.isfile(path):
            return WeightFile(self._inside(path))
        if "_nchw.bin" in file_name:
            nhwc = join(self.folder, file_name.replace("_nchw.bin", "_nhwc.bin"))
            if os.path.isfile(nhwc):
                return WeightFile(self._inside(nhwc), nhwc=True)
            self.missing.append(f"{file_name} (or its _nhwc.bin)")
        else:
            self.missing.append(file_name)
        return WeightFile(path)

    def _inside(self, path: str) -> str:
        """``path``, noting it in ``outside`` when its real location is not under the folder."""
        real = os.path.realpath(path)
        if not real.startswith(self.root + os.sep):
            self.outside.append(f"{os.path.basename(path)} is a link to {real}")
        return path


class UrlResolver:
    """Weight URLs next to model.txt; conv weight layout decided by probing the first one."""

    def __init__(self, folder: str, http: HttpSettings | None = None) -> None:
        self.folder = folder
        self.http = http
        self.conv_nhwc: bool | None = None

    def __call__(self, file_name: str) -> WeightFile:
        if "_nchw.bin" not in file_name:
            return WeightFile(join(self.folder, file_name))
        if self.conv_nhwc is None:
            self.conv_nhwc = not _url_exists(join(self.folder, file_name), self.http)
            log.info("%s: conv weights read from %s files", redact_url(self.folder),
                     "_nhwc.bin" if self.conv_nhwc else "_nchw.bin")
        if self.conv_nhwc:
            return WeightFile(join(self.folder, file_name.replace("_nchw.bin", "_nhwc.bin")), nhwc=True)
        return WeightFile(join(self.folder, file_name))


def _url_exists(url: str, http: HttpSettings | None = None) -> bool:
    from frame.engine.io.http import HttpSource

    source = HttpSource(url, http, retries=2, backoff=0.5, timeout=30.0)
    try:
        source.size()
        return True
    except EngineError:
        return False
    finally:
        source.close()


def read_structure(source: str | OnnxStreamSource, http: HttpSettings | None = None) -> Structure:
    """The engine's structure for an OnnxStream model (see the module docstring); ``http``: how a URL
    is read (None: the defaults)."""
    spec = source if isinstance(source, OnnxStreamSource) else OnnxStreamSource(str(source))
    model_txt = model_txt_location(spec.location)
    folder = spec.weights_folder or folder_of(model_txt)
    if is_url(folder) and not folder.endswith("/"):
        folder += "/"
    pool = SourcePool(http)
    try:
        ops = parse_model_text(read_text(model_txt, pool), model_txt)
        transforms = []
        if spec.range_data:
            ranges = _range_data(folder_of(model_txt), pool)
            if ranges:
                transforms.append(quantise_activations(ranges))
    finally:
        pool.close()
    resolver = UrlResolver(folder, http) if is_url(folder) else LocalResolver(folder)
    structure = build_structure(ops, resolver, model_txt, dict(spec.rename), spec.extra_outputs, transforms)
    if isinstance(resolver, LocalResolver):
        _check_local_files(resolver, structure, folder)
    return structure


def _range_data(folder: str, pool: SourcePool) -> dict[str, tuple[float, float]]:
    location = join(folder, RANGE_DATA)
    if is_url(folder):
        if not _url_exists(location):
            return {}
    elif not os.path.isfile(location):
        return {}
    ranges = parse_range_data(read_text(location, pool), location)
    log.info("%s: W8A8, %d calibrated activation ranges", redact_url(location), len(ranges))
    return ranges


def _check_local_files(resolver: LocalResolver, structure: Structure, folder: str) -> None:
    if resolver.outside:
        more = f" (and {len(resolver.outside) - 1} more)" if len(resolver.outside) > 1 else ""
        raise WeightDataError(f"{resolver.outside[0]}, outside the model folder {resolver.root}{more}: weight "
                              "files are read only from inside it; copy the file into the folder instead")
    if resolver.missing:
        shown = ", ".join(resolver.missing[:5])
        more = f" and {len(resolver.missing) - 5} more" if len(resolver.missing) > 5 else ""
        raise WeightDataError(f"{len(resolver.missing)} weight file(s) missing from {folder}: {shown}{more}")
    for ref in structure.weights.values():
        if ref.location is None:
            continue
        size = os.path.getsize(ref.location)
        if size != ref.length:
            raise WeightDataError(
                f"weight {ref.name!r}: {ref.location} has {size} bytes, model.txt declares "
                f"{ref.dtype}{list(getattr(ref, 'stored_shape', ()) or ref.shape)} = {ref.length} bytes")
