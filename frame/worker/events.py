"""What the worker processes hand back to the daemon, as frozen records: the step outputs (the
generation settings in ``generation.json``, the picture's metadata), each job kind's result, and the
events a worker writes on stdout, one JSON object per line (stage, progress, error, done).

The same compatibility rule as ``frame.worker.records``: ``to_json`` writes the keys frame 0.1 wrote,
``from_json`` reads them back (``tests/worker/test_formats.py``). Standard-library only: the daemon
reads these events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frame.worker.records import PanelStatus, optional_path, path_text


@dataclass(frozen=True)
class Generation:
    """The settings the picture was generated with (``generation.json``); ``backend``/``server`` when
    the LAN render server painted it."""

    steps: int
    guidance: float
    sampler: str
    width: int
    height: int
    model: str
    backend: str | None = None
    server: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Generation:
        return cls(steps=data["steps"], guidance=data["guidance"], sampler=data["sampler"], width=data["width"],
                   height=data["height"], model=data.get("model") or "", backend=data.get("backend"),
                   server=data.get("server"))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"steps": self.steps, "guidance": self.guidance, "sampler": self.sampler,
                                "width": self.width, "height": self.height, "model": self.model}
        if self.backend is not None:
            data.update(backend=self.backend, server=self.server)
        return data


# Seconds per step ("choose", "generate", "prepare"; the daemon adds "total"), summed over restarts
# (``timings.json``, ``pictures.timings``): a mapping is the honest type.
Timings = dict[str, float]


@dataclass(frozen=True)
class PictureMeta:
    """What the store keeps about a new picture (``done.result.meta`` → ``Store.add_picture``)."""

    prompt: str
    negative_prompt: str
    theme: str
    style: str
    origin: str
    seed: int
    sampler: str | None
    steps: int | None
    guidance: float | None
    width: int | None
    height: int | None
    model: str | None
    why: Mapping[str, Any] | None
    features: Mapping[str, float] | None = None
    timings: Mapping[str, float] = field(default_factory=dict)

    FIELDS = ("prompt", "negative_prompt", "theme", "style", "origin", "seed", "sampler", "steps", "guidance",
              "width", "height", "model", "why", "features", "timings")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PictureMeta:
        return cls(prompt=data["prompt"], negative_prompt=data.get("negative_prompt") or "",
                   theme=data.get("theme") or "", style=data.get("style") or "", origin=data.get("origin") or "",
                   seed=data["seed"], sampler=data.get("sampler"), steps=data.get("steps"),
                   guidance=data.get("guidance"), width=data.get("width"), height=data.get("height"),
                   model=data.get("model"), why=data.get("why"), features=data.get("features"),
                   timings=dict(data.get("timings") or {}))

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.FIELDS}
        data["timings"] = dict(self.timings)
        return data


@dataclass(frozen=True)
class RenderOutput:
    """A finished render job (``done.result``): the files to publish and what to store."""

    image: Path
    panel: Path | None
    meta: PictureMeta
    why_plot: Path | None = None
    prompt_id: int | None = None
    feed_item_id: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RenderOutput:
        return cls(image=Path(data["image"]), panel=optional_path(data.get("panel")),
                   meta=PictureMeta.from_json(data["meta"]), why_plot=optional_path(data.get("why_plot")),
                   prompt_id=data.get("prompt_id"), feed_item_id=data.get("feed_item_id"))

    def to_json(self) -> dict[str, Any]:
        return {"image": str(self.image), "panel": path_text(self.panel), "meta": self.meta.to_json(),
                "why_plot": path_text(self.why_plot), "prompt_id": self.prompt_id, "feed_item_id": self.feed_item_id}


@dataclass(frozen=True)
class ShowOutput:
    """The panel's answer to a show job: ``shown`` is the virtual panel's PNG (or the first path)."""

    status: PanelStatus
    message: str = ""
    paths: tuple[str, ...] = ()
    retry_at: float | None = None
    shown: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShowOutput:
        return cls(status=data.get("status") or "shown", message=data.get("message") or "",
                   paths=tuple(data.get("paths") or ()), retry_at=data.get("retry_at"), shown=data.get("shown"))

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "paths": list(self.paths),
                "retry_at": self.retry_at, "shown": self.shown}


@dataclass(frozen=True)
class PreviewOutput:
    """A preview job's result: the PNG of what the panel would show, and the "P" image it prepared
    (None when the stored panel image was still right for the panel)."""

    preview: Path
    prepared: Path | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PreviewOutput:
        return cls(preview=Path(data["preview"]), prepared=optional_path(data.get("prepared")))

    def to_json(self) -> dict[str, Any]:
        return {"preview": str(self.preview), "prepared": path_text(self.prepared)}


Output = RenderOutput | ShowOutput | PreviewOutput


# events -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageEvent:
    """The worker entered a stage (choosing, loading model, generating …)."""

    stage: str
    steps: int | None = None
    step_choice: str | None = None  # the step estimate's sentence
    backend_note: str | None = None  # where tonight's picture is painted (render server or frame)

    def progress(self) -> dict[str, Any]:
        """The fields the live status takes."""
        return {k: v for k, v in _fields(self).items() if v is not None}


@dataclass(frozen=True)
class ProgressEvent:
    """Progress inside generation: after every finished step, and at most once a second in between."""

    stage: str
    step: int
    steps: int
    fraction: float
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

    step: str
    message: str


@dataclass(frozen=True)
class DoneEvent:
    """The job finished: its output, the time it took and the worker's own peak memory."""

    result: Output
    seconds: float
    peak_rss_mb: float

    def to_json(self) -> dict[str, Any]:
        return {"event": "done", "result": self.result.to_json(), "seconds": self.seconds,
                "peak_rss_mb": self.peak_rss_mb}


Event = StageEvent | ProgressEvent | ErrorEvent | DoneEvent
_NAMES: dict[type, str] = {StageEvent: "stage", ProgressEvent: "progress", ErrorEvent: "error", DoneEvent: "done"}


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
        if name == "stage":
            return StageEvent(stage=str(data.get("stage", "")), steps=data.get("steps"),
                              step_choice=data.get("step_choice"), backend_note=data.get("backend_note"))
        if name == "progress":
            return ProgressEvent(stage=str(data.get("stage", "")), step=int(data["step"]), steps=int(data["steps"]),
                                 fraction=float(data.get("fraction", 0.0)), eta_seconds=data.get("eta_seconds"),
                                 preview=bool(data.get("preview", False)), bytes_per_step=data.get("bytes_per_step"),
                                 link_rate=data.get("link_rate"),
                                 cache_bytes_per_step=data.get("cache_bytes_per_step"))
        if name == "error":
            return ErrorEvent(step=str(data.get("step") or "render"), message=str(data.get("message")))
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
