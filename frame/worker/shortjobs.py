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
refusal, which the daemon shows the owner as it is). Standard-library only: the daemon imports this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

EXIT_REFUSED = 3  # the input is refused (a bomb, not a picture, a bad setting): the message says why


@dataclass(frozen=True)
class ImageLimits:
    """What an image child may decode: ``max_pixels`` from the header, ``decode_bytes`` of pixels in
    memory at once (after JPEG's reduced decoding), under an address-space cap of ``cap_mb``."""

    max_pixels: int
    decode_bytes: int
    cap_mb: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImageLimits:
        return cls(max_pixels=int(data["max_pixels"]), decode_bytes=int(data["decode_bytes"]),
                   cap_mb=int(data["cap_mb"]))

    def to_json(self) -> dict[str, Any]:
        return {"max_pixels": self.max_pixels, "decode_bytes": self.decode_bytes, "cap_mb": self.cap_mb}


@dataclass(frozen=True)
class PhotoJob:
    """Decode the photo on stdin; write it upright, at most ``max_side`` px, to ``out`` + ".png" (it
    came as PNG) or ".jpg" (anything else, at ``jpeg_quality``)."""

    out: Path
    limits: ImageLimits
    max_side: int
    jpeg_quality: int
    kind: Literal["photo"] = "photo"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "out": str(self.out), "limits": self.limits.to_json(),
                "max_side": self.max_side, "jpeg_quality": self.jpeg_quality}


@dataclass(frozen=True)
class ThumbsJob:
    """JPEG thumbnails (at most ``size`` px a side): each ``(source, target)`` pair of ``items``."""

    items: tuple[tuple[Path, Path], ...]
    limits: ImageLimits
    size: int
    kind: Literal["thumbs"] = "thumbs"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "items": [[str(s), str(t)] for s, t in self.items],
                "limits": self.limits.to_json(), "size": self.size}


@dataclass(frozen=True)
class CheckJob:
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
    prompt: Mapping[str, Any] | None = None
    kind: Literal["check"] = "check"

    def to_json(self) -> dict[str, Any]:
        data = {"kind": self.kind, "config": str(self.config), "what": self.what, "cap_mb": self.cap_mb}
        if self.prompt is not None:
            data["prompt"] = dict(self.prompt)
        return data


ChildJob = PhotoJob | ThumbsJob | CheckJob
ENTRY: dict[str, str] = {"photo": "imagechild", "thumbs": "imagechild", "check": "checkchild"}


def child_job_from_json(data: Any) -> ChildJob:
    """The job in a child's argument; ValueError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("a short child's job is a JSON object")
    kind = data.get("kind")
    try:
        if kind == "photo":
            return PhotoJob(out=Path(data["out"]), limits=ImageLimits.from_json(data["limits"]),
                            max_side=int(data["max_side"]), jpeg_quality=int(data["jpeg_quality"]))
        if kind == "thumbs":
            return ThumbsJob(items=tuple((Path(s), Path(t)) for s, t in data["items"]),
                             limits=ImageLimits.from_json(data["limits"]), size=int(data["size"]))
        if kind == "check":
            what = data["what"]
            if what not in ("file", "config", "prompt", "loras"):
                raise ValueError(f"unknown check {what!r}")
            prompt = data.get("prompt")
            if prompt is not None and not isinstance(prompt, Mapping):
                raise ValueError("a check job's prompt is a JSON object")
            return CheckJob(config=Path(data["config"]), what=what, cap_mb=int(data["cap_mb"]),
                            prompt=dict(prompt) if prompt is not None else None)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"a {kind} job without a usable {exc}") from exc
    raise ValueError(f"unknown short job kind {kind!r}")


@dataclass(frozen=True)
class PhotoOutput:
    """The stored photo's file and size, and what came in (format and size, for the log)."""

    file: Path
    width: int
    height: int
    source_format: str
    source_width: int
    source_height: int
    kind: Literal["photo"] = "photo"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": str(self.file), "width": self.width, "height": self.height,
                "source_format": self.source_format, "source_width": self.source_width,
                "source_height": self.source_height}


@dataclass(frozen=True)
class ThumbsOutput:
    """The thumbnails written, and (source, reason) for each picture that could not have one."""

    made: tuple[Path, ...]
    failed: tuple[tuple[Path, str], ...] = ()
    kind: Literal["thumbs"] = "thumbs"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "made": [str(p) for p in self.made],
                "failed": [[str(p), reason] for p, reason in self.failed]}


KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class CheckOutput:
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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "lines": list(self.lines),
                "problems": [[list(path), message] for path, message in self.problems],
                "size_rule": self.size_rule, "night_size": self.night_size, "model_known": self.model_known}


ChildOutput = PhotoOutput | ThumbsOutput | CheckOutput


def _size_text(value: Any) -> str | None:
    """A "WIDTHxHEIGHT" answer, or None for anything else (the child's answer is read, not trusted)."""
    return value if isinstance(value, str) and re.fullmatch(r"[1-9][0-9]{0,4}x[1-9][0-9]{0,4}", value) else None


def child_output_from_json(data: Mapping[str, Any]) -> ChildOutput:
    kind = data.get("kind")
    if kind == "photo":
        return PhotoOutput(file=Path(data["file"]), width=int(data["width"]), height=int(data["height"]),
                           source_format=str(data["source_format"]), source_width=int(data["source_width"]),
                           source_height=int(data["source_height"]))
    if kind == "thumbs":
        return ThumbsOutput(made=tuple(Path(p) for p in data["made"]),
                            failed=tuple((Path(p), str(reason)) for p, reason in data["failed"]))
    if kind == "check":
        rule = data.get("size_rule")
        return CheckOutput(lines=tuple(str(line) for line in data["lines"]),
                           problems=tuple((tuple(path), str(message)) for path, message in data["problems"]),
                           size_rule=str(rule) if rule is not None else None,
                           night_size=_size_text(data.get("night_size")),
                           model_known=bool(data.get("model_known", True)))
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
