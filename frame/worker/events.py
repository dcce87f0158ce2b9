"""What the worker processes hand back to the daemon, as frozen records: the step outputs (the
generation settings in ``generation.json``, the picture's metadata), each job kind's result, and the
events a worker writes on stdout, one JSON object per line (stage, progress, error, done).

The same compatibility rule as ``frame.worker.records``, and the same codec (``frame.recordcodec``):
``to_json`` writes the keys frame 0.1 wrote, ``from_json`` reads them back with every value's type
checked (``tests/worker/test_formats.py``). Standard-library only: the daemon
reads these events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frame.recordcodec import Record, decode, encode, wire
from frame.worker.records import PanelStatus


@dataclass(frozen=True)
class Generation(Record):
    """The settings the picture was generated with (``generation.json``); ``backend``/``server`` when
    the LAN render server painted it. Its own ``to_json``: 0.1 wrote neither key, and a remote
    picture writes ``server`` even when it is null."""

    steps: int
    guidance: float
    sampler: str
    width: int
    height: int
    model: str = wire(absent="", or_default=True)
    backend: str | None = None
    server: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = encode(self)
        if self.backend is None:
            del data["backend"], data["server"]
        return data


# Seconds per step ("choose", "generate", "prepare"; the daemon adds "total"), summed over restarts
# (``timings.json``, ``pictures.timings``): a mapping is the honest type.
Timings = dict[str, float]


@dataclass(frozen=True)
class PictureMeta(Record):
    """What the store keeps about a new picture (``done.result.meta`` → ``Store.add_picture``)."""

    prompt: str
    negative_prompt: str = wire(absent="", or_default=True)
    theme: str = wire(absent="", or_default=True)
    style: str = wire(absent="", or_default=True)
    origin: str = wire(absent="", or_default=True)
    seed: int
    sampler: str | None = wire(absent=None)
    steps: int | None = wire(absent=None)
    guidance: float | None = wire(absent=None)
    width: int | None = wire(absent=None)
    height: int | None = wire(absent=None)
    model: str | None = wire(absent=None)
    why: Mapping[str, Any] | None = wire(absent=None)
    features: Mapping[str, float] | None = None
    timings: Mapping[str, float] = wire(default_factory=dict, or_default=True)


@dataclass(frozen=True)
class RenderOutput(Record):
    """A finished render job (``done.result``): the files to publish and what to store."""

    image: Path
    panel: Path | None = wire(absent=None, or_default=True)
    meta: PictureMeta
    why_plot: Path | None = wire(None, or_default=True)
    prompt_id: int | None = None
    feed_item_id: int | None = None


@dataclass(frozen=True)
class ShowOutput(Record):
    """The panel's answer to a show job: ``shown`` is the virtual panel's PNG (or the first path)."""

    status: PanelStatus = wire(absent="shown", or_default=True)
    message: str = wire("", or_default=True)
    paths: tuple[str, ...] = wire((), or_default=True)
    retry_at: float | None = None
    shown: str | None = None


@dataclass(frozen=True)
class PreviewOutput(Record):
    """A preview job's result: the PNG of what the panel would show, and the "P" image it prepared
    (None when the stored panel image was still right for the panel)."""

    preview: Path
    prepared: Path | None = wire(None, or_default=True)


Output = RenderOutput | ShowOutput | PreviewOutput


# events -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageEvent:
    """The worker entered a stage (choosing, loading model, generating …)."""

    stage: str = wire(absent="")
    steps: int | None = None
    step_choice: str | None = None  # the step estimate's sentence
    backend_note: str | None = None  # where tonight's picture is painted (render server or frame)

    def progress(self) -> dict[str, Any]:
        """The fields the live status takes."""
        return {k: v for k, v in _fields(self).items() if v is not None}


@dataclass(frozen=True)
class ProgressEvent:
    """Progress inside generation: after every finished step, and at most once a second in between."""

    stage: str = wire(absent="")
    step: int
    steps: int
    fraction: float = wire(absent=0.0, convert=float)
    eta_seconds: float | None = None
    preview: bool = False  # JOB_DIR/preview.png was just written
    bytes_per_step: int | None = None  # weight bytes fetched per step (streamed models)
    link_rate: int | None = None  # HTTP bytes per second
    cache_bytes_per_step: int | None = None  # of bytes_per_step, read from the weight cache (model.cache)

    def progress(self) -> dict[str, Any]:
        fields = {k: v for k, v in _fields(self).items() if v is not None}
        if not self.preview:
            fields.pop("preview")
        return fields


@dataclass(frozen=True)
class ErrorEvent:
    """A job failed in ``step``; the exit code says whether a restart may help."""

    step: str = wire(absent="render", or_default=True)
    message: str = wire(absent="")


@dataclass(frozen=True)
class DoneEvent:
    """The job finished: its output, the time it took and the worker's own peak memory. Its own
    ``to_json`` and reading (``event_from_json``): which of the three outputs ``result`` is, is told
    by its keys (``output_from_json``), not by a declaration the codec could follow."""

    result: Output
    seconds: float
    peak_rss_mb: float

    def to_json(self) -> dict[str, Any]:
        return {"event": "done", "result": self.result.to_json(), "seconds": self.seconds,
                "peak_rss_mb": self.peak_rss_mb}


Event = StageEvent | ProgressEvent | ErrorEvent | DoneEvent
_NAMES: dict[type, str] = {StageEvent: "stage", ProgressEvent: "progress", ErrorEvent: "error", DoneEvent: "done"}
_CLASSES: dict[str, type] = {name: cls for cls, name in _NAMES.items()}


def _fields(event: Any) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__dataclass_fields__}


def event_json(event: Event) -> dict[str, Any]:
    """``{"event": "<name>", ...fields}`` as the worker writes it (optional fields left out when unset)."""
    if isinstance(event, DoneEvent):
        return event.to_json()
    if isinstance(event, ErrorEvent):
        return {"event": "error", "step": event.step, "message": event.message}
    return {"event": _NAMES[type(event)], **event.progress()}


def event_line(event: Event) -> str:
    return json.dumps(event_json(event))


def output_from_json(data: Mapping[str, Any]) -> Output:
    """A render job's result carries ``meta``, a preview's ``preview``; a show job's the panel's ``status``."""
    if "meta" in data:
        return RenderOutput.from_json(data)
    return PreviewOutput.from_json(data) if "preview" in data else ShowOutput.from_json(data)


def event_from_json(data: Any) -> Event | None:
    """The event in one decoded line, or None when it is not one of the protocol's four (a stray print)."""
    if not isinstance(data, Mapping):
        return None
    name = data.get("event")
    try:
        if name in ("stage", "progress", "error"):
            return decode(_CLASSES[name], data)
        if name == "done":
            return DoneEvent(result=output_from_json(data["result"]), seconds=float(data.get("seconds") or 0.0),
                             peak_rss_mb=float(data.get("peak_rss_mb") or 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    return None


def parse_event(line: bytes | str) -> Event | None:
    """One stdout line of a worker as an event; None for anything that is not the protocol."""
    try:
        return event_from_json(json.loads(line))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
