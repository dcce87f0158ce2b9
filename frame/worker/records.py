"""What the daemon hands the worker processes, as frozen records: the job (``job.json``), the theme
choice (``choice.json``) and the exit codes. What comes back — the step outputs, the worker's events on
stdout and the results they carry — is in ``frame.worker.events``.

Each record is declared once and ``frame.recordcodec`` encodes and decodes it from its fields (the
``wire(...)`` metadata holds 0.1's per-key details); ``to_json`` writes exactly the keys frame 0.1
wrote and ``from_json`` reads them back, checking every value's type —
a missing optional key (a file from 0.1) takes its default and an unknown one (a file from a later
version) is ignored — so a job folder left by an older daemon resumes under this code
(``tests/worker/test_formats.py``). The taste explanation (``Why.details``) and the picture's stored
"why" are open mappings on purpose: the picker writes its own explanation and older pictures hold
other shapes.

The daemon imports this module, so it stays standard-library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from frame.recordcodec import Record, RecordError, encode, wire
from frame.statefile import read_json, write_json

EXIT_PERMANENT = 3  # a missing part, a bad model: restarting cannot help
EXIT_STOPPED = 143  # SIGTERM: the job resumes from its last checkpoint

StepName = Literal["job", "choose", "load model", "generate", "prepare", "show", "store", "info screen", "render"]
RenderKind = Literal["night", "now"]
JobKind = Literal["render", "show"]
# display.care's SHOWN / UNCHANGED / TOO_SOON, declared here because display imports Pillow and the
# daemon imports this module (tests/worker/test_records.py ties the two).
PanelStatus = Literal["shown", "unchanged", "too-soon"]


# the job ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobCandidate(Record):
    """One candidate for tonight's theme (``job.candidates[i]``): a theme × style combination
    (``origin`` "theme") or a feed prompt (``origin`` "feed:<name>", with its item id)."""

    prompt: str
    theme: str = wire(absent="", or_default=True)
    style: str = wire(absent="", or_default=True)
    weight: float = wire(absent=1.0, convert=float)
    origin: str = wire(absent="theme", or_default=True)
    # feed items only (0.1 wrote no key for theme combinations)
    negative_prompt: str | None = wire(None, omit_none=True)
    feed_item_id: int | None = wire(None, omit_none=True)


@dataclass(frozen=True)
class RatedPicture:
    """A rated picture for the taste model (``job.history[i]``); the taste ``Candidate`` it was made
    from is nested under ``why`` as the store keeps it. Its own ``to_json``/``from_json``: that
    nesting (one field under another key's object, any other shape of ``why`` read as none) is the
    one wire rule here the codec does not have."""

    id: int
    prompt: str
    theme: str | None
    style: str | None
    origin: str | None
    rating_kind: Literal["thumb", "stars"]
    rating_value: int
    candidate: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RatedPicture:
        why = data.get("why") if isinstance(data.get("why"), Mapping) else {}
        return cls(id=data["id"], prompt=data["prompt"], theme=data.get("theme"), style=data.get("style"),
                   origin=data.get("origin"), rating_kind=data["rating_kind"], rating_value=data["rating_value"],
                   candidate=why.get("candidate"))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "prompt": self.prompt, "theme": self.theme, "style": self.style,
                "origin": self.origin, "rating_kind": self.rating_kind, "rating_value": self.rating_value,
                "why": {"candidate": self.candidate}}


@dataclass(frozen=True)
class Why:
    """Why tonight's picture was chosen: the method ("queue", "taste (model|explore|variety)"), the
    owner-facing sentence and the rest as written (the picker's ``Choice.to_dict()``: candidate,
    mode, score, reason, explanation; ``plot``/``plot_note``; ``painted``/``remote_fallback``).
    Its own ``to_json``/``from_json``: the details are an open mapping flattened beside the two keys."""

    method: str
    sentence: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def plot(self) -> str | None:
        """The explanation plot's file name in the job folder, if one was drawn."""
        plot = self.details.get("plot")
        return plot if isinstance(plot, str) and plot else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Why:
        data = dict(data or {})
        return cls(method=str(data.pop("method", "") or ""), sentence=str(data.pop("sentence", "") or ""),
                   details=data)

    def to_json(self) -> dict[str, Any]:
        return {**self.details, "sentence": self.sentence, "method": self.method}

    def with_details(self, **extra: Any) -> Why:
        return Why(self.method, self.sentence, {**self.details, **extra})


@dataclass(frozen=True)
class ThemeChoice(Record):
    """Tonight's prompt (``choice.json``; ``job.choice`` for a queued prompt). Read by the codec;
    its own ``to_json`` because 0.1 wrote either ``prompt_id`` (a queued prompt) or the taste
    picker's ``features``/``feed_item_id``, never both."""

    prompt: str
    negative_prompt: str = wire(absent="", or_default=True)
    theme: str = wire(absent="", or_default=True)
    style: str = wire(absent="", or_default=True)
    origin: str = wire(absent="", or_default=True)  # "queue" | "theme" | "feed:<name>"
    why: Why = wire(absent=Why("", ""), or_default=True)
    features: Mapping[str, float] | None = None
    prompt_id: int | None = None  # a queued prompt
    feed_item_id: int | None = None  # a feed prompt

    def to_json(self) -> dict[str, Any]:
        data = encode(self)
        if self.origin == "queue" or self.prompt_id is not None:
            del data["features"], data["feed_item_id"]
        else:  # the taste picker's keys, written as 0.1 did (feed_item_id null for a theme)
            del data["prompt_id"]
        return data


@dataclass(frozen=True)
class PromptSettings(Record):
    """A queued prompt's own generation settings (``job.settings``); None: the night's setting
    (``model.*``, the step estimate). The seed travels as ``RenderJob.seed``."""

    steps: int | None = None
    sampler: str | None = None
    guidance: float | None = None
    width: int | None = None
    height: int | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in self.__dataclass_fields__)



@dataclass(frozen=True)
class Variation(Record):
    """"More like this" (``job.variation``): image-to-image from a gallery picture at ``strength``."""

    image: Path
    strength: float = wire(convert=float)
    picture_id: int


@dataclass(frozen=True)
class RenderJob(Record):
    """A render job (``job.json``, kind "render"), written once by the daemon before the first worker."""

    render_id: int = wire(absent=0, or_default=True)
    render_kind: RenderKind = wire(absent="now", or_default=True)
    state_dir: Path
    seed: int
    choice: ThemeChoice | None = wire(None, or_default=True)
    candidates: tuple[JobCandidate, ...] = wire((), or_default=True)
    history: tuple[RatedPicture, ...] = wire((), or_default=True)
    recent_themes: tuple[str, ...] = wire((), or_default=True)
    deadline: float | None = None  # epoch seconds: the worker picks the steps that fit (absent in 0.1)
    # a queued prompt's own; keys only when used: a job without them is byte-for-byte 0.1's
    settings: PromptSettings = wire(default_factory=PromptSettings, or_default=True, omit_default=True)
    # "more like this": img2img from a gallery picture
    variation: Variation | None = wire(None, or_default=True, omit_none=True)
    kind: Literal["render"] = "render"

    WIRE_ORDER = ("kind", "render_kind", "render_id", "state_dir", "seed", "choice", "candidates", "history",
                  "recent_themes", "deadline", "settings", "variation")


INFO_HINT = "Hold a button again to return to the picture."


@dataclass(frozen=True)
class InfoFacts(Record):
    """What the info screen draws (``job.info``): the worker that draws it reads no database."""

    picture_id: int | None = wire(absent=None)
    image: str | None = wire(absent=None)
    title: str = wire(absent="", or_default=True)
    prompt: str = wire(absent="", or_default=True)
    details: tuple[tuple[str, str], ...] = wire(absent=(), or_default=True)
    why: str = wire(absent="", or_default=True)
    url: str = wire(absent="", or_default=True)
    # the footer's last line; a pairing code's screen says something else; the info
    # screen's job keeps 0.1's keys without it (tests/worker/test_formats.py)
    hint: str = wire(INFO_HINT, or_default=True, omit_default=True)


@dataclass(frozen=True)
class ShowJob(Record):
    """A show job (``job.json``, kind "show"): a stored picture, or the info screen (``info``) drawn
    into ``image`` first. Read by the codec; its own ``to_json`` because 0.1 wrote neither
    ``preview`` nor ``prepared``, and a preview job writes ``prepared`` even when it is null."""

    state_dir: Path
    image: Path
    panel: Path | None = wire(None, or_default=True)
    info: InfoFacts | None = wire(None, or_default=True, omit_none=True)
    kind: Literal["show"] = "show"
    # a preview for the phone page instead of a refresh: write what the panel would show to
    # ``preview`` (and a freshly prepared "P" image to ``prepared``, when given); the panel is untouched
    preview: Path | None = wire(None, or_default=True)
    prepared: Path | None = wire(None, or_default=True)

    WIRE_ORDER = ("kind", "state_dir", "image", "panel", "info", "preview", "prepared")

    def to_json(self) -> dict[str, Any]:
        data = encode(self)
        if self.preview is None:  # keys only when set: a show job stays what 0.1 wrote
            del data["preview"], data["prepared"]
        return data


Job = RenderJob | ShowJob
JOB_FILE = "job.json"


class JobUnreadable(ValueError):
    """``job.json`` holds something that is not a job of a known kind."""


def job_from_json(data: Any) -> Job:
    if not isinstance(data, Mapping):
        raise JobUnreadable("not a JSON object")
    try:
        if data.get("kind") == "render":
            return RenderJob.from_json(data)
        if data.get("kind") == "show":
            return ShowJob.from_json(data)
    except RecordError as exc:
        raise JobUnreadable(f"a {data.get('kind')} job: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise JobUnreadable(f"a {data.get('kind')} job without a usable {exc}") from exc
    raise JobUnreadable(f"unknown job kind {data.get('kind')!r}")


def read_job(folder: Path) -> Job | None:
    """The job in ``folder``, or None when ``job.json`` is missing or damaged (``statefile`` sets a
    damaged one aside). Raises ``JobUnreadable`` for a readable file that is not a job."""
    data = read_json(Path(folder) / JOB_FILE)
    return None if data is None else job_from_json(data)


def write_job(folder: Path, job: Job) -> None:
    write_json(Path(folder) / JOB_FILE, job.to_json())
