"""The models on the frame, as the settings page lists them: ``<state_dir>/models/<name>`` (where the
phone's "import from a URL" writes, and where an owner may put folders by hand) and the configured
``model.source``, each with its kind (SD 1.x, SD 2.x, SDXL, Turbo) and stored precision.

Read in the daemon, so only small JSON files (each capped at ``MAX_JSON``, hostile like every file)
and the UNet graph's tensor headers (``frame.daemon.onnx_dtypes``, no onnx). The kind comes from what
the folder's files say, in the order the importer writes them (``frame.convert.importer.layout``):
SDXL when ``model_index.json`` has a second text encoder (or names the XL pipeline); otherwise the text
encoder's activation tells OpenAI CLIP (``quick_gelu``: SD 1.x) from OpenCLIP (``gelu``: SD 2.x), which
holds for the tiny test models too, where widths say nothing; a Turbo model is the one whose scheduler
is Euler ancestral with trailing spacing (how frame reads a few-step model). The folder's facts are
cached by the modification times of the files read, so a page view costs a few ``stat`` calls.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from frame.daemon.onnx_dtypes import stored_precision
from frame.models import DEMO_SOURCE, demo_model_path, is_demo_model
from frame.recordcodec import Record
from frame.redact import redact_url

MODELS_FOLDER = "models"
MAX_JSON = 1 << 20
MAX_LISTED = 200
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FILES = ("model_index.json", "text_encoder/config.json", "scheduler/scheduler_config.json", "unet/model.onnx")


@dataclass(frozen=True)
class ModelEntry(Record):
    """One model as the page shows it. ``name``: the folder's name (``demo`` for the bundled one);
    ``source``: what ``model.source`` is set to in order to use it; ``in_use``: it is the configured one."""

    name: str
    source: str
    kind: str
    precision: str
    in_use: bool
    in_models_folder: bool


def models_dir(state_dir: Path) -> Path:
    return Path(state_dir) / MODELS_FOLDER


def valid_name(name: str) -> bool:
    """A model folder's name the owner may choose: letters, digits, ``.``, ``_``, ``-``; no leading dot."""
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def _json(path: Path) -> dict:
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_JSON + 1)
        data = json.loads(raw) if len(raw) <= MAX_JSON else None
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def model_kind(folder: Path) -> str:
    """"SDXL", "SDXL Turbo", "SD 2.x", "SD Turbo", "SD 1.x", or "unknown" for a folder frame cannot tell."""
    index = _json(folder / "model_index.json")
    if not index:
        return "unknown"
    scheduler = _json(folder / "scheduler" / "scheduler_config.json")
    turbo = (scheduler.get("_class_name") == "EulerAncestralDiscreteScheduler"
             and scheduler.get("timestep_spacing") == "trailing")
    if "text_encoder_2" in index or "XL" in str(index.get("_class_name", "")):
        return "SDXL Turbo" if turbo else "SDXL"
    activation = _json(folder / "text_encoder" / "config.json").get("hidden_act")
    if activation == "gelu":
        return "SD Turbo" if turbo else "SD 2.x"
    if activation == "quick_gelu":
        return "SD 1.x"
    return "unknown"


class ModelFacts:
    """``facts(folder)`` → (kind, precision), remembered until one of the files read changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[tuple, tuple[str, str]]] = {}

    def facts(self, folder: Path) -> tuple[str, str]:
        stamp = tuple(_stamp(folder / name) for name in FILES)
        key = str(folder)
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[0] == stamp:
            return known[1]
        found = (model_kind(folder), stored_precision(folder / "unet" / "model.onnx") or "unknown")
        with self._lock:
            if len(self._known) > MAX_LISTED:
                self._known.clear()
            self._known[key] = (stamp, found)
        return found


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


FACTS = ModelFacts()


def list_models(state_dir: Path, source: str, facts: ModelFacts = FACTS) -> list[ModelEntry]:
    """The models in ``<state_dir>/models`` (folders with a ``model_index.json``, by name; an import's
    ``.NAME.import`` folder is not one yet), then the bundled demo, then the configured ``model.source``
    when it is elsewhere (a URL is listed without facts: the daemon reads nothing over the network)."""
    folder = models_dir(state_dir)
    in_use = _resolved(source)
    entries = []
    try:
        names = sorted(p.name for p in folder.iterdir() if valid_name(p.name) and (p / "model_index.json").is_file())
    except OSError:
        names = []
    for name in names[:MAX_LISTED]:
        path = folder / name
        kind, precision = facts.facts(path)
        entries.append(ModelEntry(name, str(path), kind, precision, _resolved(str(path)) == in_use, True))
    kind, precision = facts.facts(demo_model_path())
    entries.append(ModelEntry(DEMO_SOURCE, DEMO_SOURCE, f"{kind}, random weights (the demo)", precision,
                              is_demo_model(source), False))
    if not any(entry.in_use for entry in entries):
        if "://" in source:
            shown = redact_url(source)  # the page and the API never show a URL's credentials
            entries.append(ModelEntry(shown.rstrip("/").rsplit("/", 1)[-1] or shown, shown, "served over the network",
                                      "unknown", True, False))
        else:
            path = Path(source).expanduser()
            kind, precision = facts.facts(path)
            entries.append(ModelEntry(path.name or source, source, kind, precision, True, False))
    return entries


def _resolved(source: str) -> str:
    if source == DEMO_SOURCE or "://" in source:
        return source
    try:
        return str(Path(source).expanduser().resolve())
    except (OSError, RuntimeError):
        return source


def model_in_folder(state_dir: Path, name: str) -> Path | None:
    """The folder ``<state_dir>/models/NAME`` when NAME is a valid name of a model there, else None."""
    if not valid_name(name):
        return None
    path = models_dir(state_dir) / name
    return path if (path / "model_index.json").is_file() else None
