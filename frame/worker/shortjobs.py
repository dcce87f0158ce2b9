"""The short children's contract: what the daemon hands a short child of the worker kind and what
comes back, as frozen records.

The daemon never imports numpy, onnx or Pillow (``tests/test_layers.py``, third rule), so whatever
needs them for the phone page runs in a short child under its own memory cap:

* ``python -m frame.worker.imagechild``: an uploaded photo decoded, turned upright, scaled and
  re-encoded (``PhotoJob`` → ``PhotoOutput``), gallery thumbnails (``ThumbsJob`` → ``ThumbsOutput``);
* ``python -m frame.worker.checkchild``: the settings checks that read model graphs (``CheckJob`` →
  ``CheckOutput``).

The job is the child's one argument, as JSON; an upload's bytes come on its stdin (the daemon's
temporary file, never copied through the daemon). The child answers with one line on stdout, the
events protocol of ``frame.worker.events``: ``{"event": "done", "result": {...}, "seconds": s,
"peak_rss_mb": m}`` or ``{"event": "error", "step": kind, "message": ...}`` (exit status 3 for a
refusal, which the daemon shows the owner as it is). The records are encoded and decoded by
``frame.recordcodec`` (a job or an answer with a wrong type is refused naming the field).
Standard-library only: the daemon imports this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from frame.recordcodec import Record, decode, wire

EXIT_REFUSED = 3  # the input is refused (a bomb, not a picture, a bad setting): the message says why


@dataclass(frozen=True)
class ImageLimits(Record):
    """What an image child may decode: ``max_pixels`` from the header, ``decode_bytes`` of pixels in
    memory at once (after JPEG's reduced decoding), under an address-space cap of ``cap_mb``."""

    max_pixels: int
    decode_bytes: int
    cap_mb: int




@dataclass(frozen=True)
class PhotoJob(Record):
    """Decode the photo on stdin; write it upright, at most ``max_side`` px, to ``out`` + ".png" (it
    came as PNG) or ".jpg" (anything else, at ``jpeg_quality``)."""

    out: Path
    limits: ImageLimits
    max_side: int
    jpeg_quality: int
    kind: Literal["photo"] = "photo"

    WIRE_ORDER = ("kind", "out", "limits", "max_side", "jpeg_quality")



@dataclass(frozen=True)
class ThumbsJob(Record):
    """JPEG thumbnails (at most ``size`` px a side): each ``(source, target)`` pair of ``items``."""

    items: tuple[tuple[Path, Path], ...]
    limits: ImageLimits
    size: int
    kind: Literal["thumbs"] = "thumbs"

    WIRE_ORDER = ("kind", "items", "limits", "size")



@dataclass(frozen=True)
class CheckJob(Record):
    """The checks that need model graphs, on ``config`` (a YAML file). ``what`` "file": as ``frame config
    check`` (schema and deep checks, the process environment's layers too), answered as problem lines;
    "config": the deep checks of exactly that file's settings (``environ`` empty), as (path, message);
    "prompt": the model's rules for a queued prompt's own ``prompt`` settings (steps, sampler,
    guidance, width, height; absent = the night's), as (field, message), with the model's size rule;
    "loras": the ``<lora:…>`` tags of ``prompt["texts"]`` (``frame.worker.lora_checks``), problems as
    (("prompt",), message) and warnings as ``lines``."""

    config: Path
    what: Literal["file", "config", "prompt", "loras"]
    cap_mb: int
    prompt: Mapping[str, Any] | None = wire(None, omit_none=True)
    kind: Literal["check"] = "check"

    WIRE_ORDER = ("kind", "config", "what", "cap_mb", "prompt")



ChildJob = PhotoJob | ThumbsJob | CheckJob
_JOBS: dict[str, type[ChildJob]] = {"photo": PhotoJob, "thumbs": ThumbsJob, "check": CheckJob}
ENTRY: dict[str, str] = {"photo": "imagechild", "thumbs": "imagechild", "check": "checkchild"}


def child_job_from_json(data: Any) -> ChildJob:
    """The job in a child's argument; ValueError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("a short child's job is a JSON object")
    kind = data.get("kind")
    if kind in _JOBS:
        return decode(_JOBS[kind], data)
    raise ValueError(f"unknown short job kind {kind!r}")


@dataclass(frozen=True)
class PhotoOutput(Record):
    """The stored photo's file and size, and what came in (format and size, for the log)."""

    file: Path
    width: int
    height: int
    source_format: str
    source_width: int
    source_height: int
    kind: Literal["photo"] = "photo"

    WIRE_ORDER = ("kind", "file", "width", "height", "source_format", "source_width", "source_height")



@dataclass(frozen=True)
class ThumbsOutput(Record):
    """The thumbnails written, and (source, reason) for each picture that could not have one."""

    made: tuple[Path, ...]
    failed: tuple[tuple[Path, str], ...] = ()
    kind: Literal["thumbs"] = "thumbs"

    WIRE_ORDER = ("kind", "made", "failed")



KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class CheckOutput(Record):
    """``lines`` (what "file" found, as ``ConfigError.problems``) or ``problems`` ("config": key path,
    message; "prompt": (field,), message). "prompt" also answers the model's ``size_rule`` in words,
    tonight's ``night_size`` ("672x400", the queue form's hint), and ``model_known`` False when the
    model cannot be asked without loading it (behind a URL)."""

    lines: tuple[str, ...] = ()
    problems: tuple[tuple[KeyPath, str], ...] = ()
    size_rule: str | None = None
    night_size: str | None = None
    model_known: bool = True
    kind: Literal["check"] = "check"

    WIRE_ORDER = ("kind", "lines", "problems", "size_rule", "night_size", "model_known")



ChildOutput = PhotoOutput | ThumbsOutput | CheckOutput
_OUTPUTS: dict[str, type[ChildOutput]] = {"photo": PhotoOutput, "thumbs": ThumbsOutput}


def _size_text(value: Any) -> str | None:
    """A "WIDTHxHEIGHT" answer, or None for anything else (the child's answer is read, not trusted)."""
    return value if isinstance(value, str) and re.fullmatch(r"[1-9][0-9]{0,4}x[1-9][0-9]{0,4}", value) else None


def child_output_from_json(data: Mapping[str, Any]) -> ChildOutput:
    """A child's result, checked by the codec; a ``night_size`` that is not "WIDTHxHEIGHT" reads as none."""
    kind = data.get("kind")
    if kind == "check":
        return decode(CheckOutput, {**data, "night_size": _size_text(data.get("night_size"))})
    if kind in _OUTPUTS:
        return decode(_OUTPUTS[kind], data)
    raise ValueError(f"unknown short job result {kind!r}")


@dataclass(frozen=True)
class ChildAnswer:
    """A child's last line: its result, or the refusal's message; its time and own peak (VmHWM)."""

    result: ChildOutput | None
    message: str = ""
    seconds: float = 0.0
    peak_rss_mb: float = 0.0


def done_line(result: ChildOutput, seconds: float, peak_rss_mb: float) -> str:
    return json.dumps({"event": "done", "result": result.to_json(), "seconds": round(seconds, 3),
                       "peak_rss_mb": round(peak_rss_mb, 1)})


def error_line(kind: str, message: str) -> str:
    return json.dumps({"event": "error", "step": kind, "message": message})


def parse_answer(stdout: str) -> ChildAnswer | None:
    """The child's answer from its stdout (its last line), or None when it wrote none (a crash)."""
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    try:
        data = json.loads(lines[-1])
        if data.get("event") == "done":
            return ChildAnswer(child_output_from_json(data["result"]), seconds=float(data.get("seconds") or 0),
                               peak_rss_mb=float(data.get("peak_rss_mb") or 0))
        if data.get("event") == "error":
            return ChildAnswer(None, message=str(data.get("message") or "failed"))
    except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        return None
    return None
