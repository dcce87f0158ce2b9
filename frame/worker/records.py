"""What the daemon hands the worker processes, as frozen records: the job (``job.json``), the theme
choice (``choice.json``) and the exit codes. What comes back — the step outputs, the worker's events on
stdout and the results they carry — is in ``frame.worker.events``.

Each record's ``to_json`` writes exactly the keys frame 0.1 wrote and ``from_json`` reads them back —
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

from frame.statefile import read_json, write_json

EXIT_PERMANENT = 3  # a missing part, a bad model: restarting cannot help
EXIT_STOPPED = 143  # SIGTERM: the job resumes from its last checkpoint

StepName = Literal["job", "choose", "load model", "generate", "prepare", "show", "store", "info screen", "render"]
RenderKind = Literal["night", "now"]
JobKind = Literal["render", "show"]
# display.care's SHOWN / UNCHANGED / TOO_SOON, declared here because display imports Pillow and the
# daemon imports this module (tests/worker/test_records.py ties the two).
PanelStatus = Literal["shown", "unchanged", "too-soon"]


def optional_path(value: Any) -> Path | None:
    return Path(value) if value else None


def path_text(value: Path | None) -> str | None:
    return str(value) if value is not None else None


# the job ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobCandidate:
    """One candidate for tonight's theme (``job.candidates[i]``): a theme × style combination
    (``origin`` "theme") or a feed prompt (``origin`` "feed:<name>", with its item id)."""

    prompt: str
    theme: str
    style: str
    weight: float
    origin: str
    negative_prompt: str | None = None  # feed items only (0.1 wrote no key for theme combinations)
    feed_item_id: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobCandidate:
        return cls(prompt=data["prompt"], theme=data.get("theme") or "", style=data.get("style") or "",
                   weight=float(data.get("weight", 1.0)), origin=data.get("origin") or "theme",
                   negative_prompt=data.get("negative_prompt"), feed_item_id=data.get("feed_item_id"))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"prompt": self.prompt, "theme": self.theme, "style": self.style,
                                "weight": self.weight, "origin": self.origin}
        if self.negative_prompt is not None:
            data["negative_prompt"] = self.negative_prompt
        if self.feed_item_id is not None:
            data["feed_item_id"] = self.feed_item_id
        return data


@dataclass(frozen=True)
class RatedPicture:
    """A rated picture for the taste model (``job.history[i]``); the taste ``Candidate`` it was made
    from is nested under ``why`` as the store keeps it."""

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
    mode, score, reason, explanation; ``plot``/``plot_note``; ``painted``/``remote_fallback``)."""

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
class ThemeChoice:
    """Tonight's prompt (``choice.json``; ``job.choice`` for a queued prompt)."""

    prompt: str
    negative_prompt: str
    theme: str
    style: str
    origin: str  # "queue" | "theme" | "feed:<name>"
    why: Why
    features: Mapping[str, float] | None = None
    prompt_id: int | None = None  # a queued prompt
    feed_item_id: int | None = None  # a feed prompt

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ThemeChoice:
        return cls(prompt=data["prompt"], negative_prompt=data.get("negative_prompt") or "",
                   theme=data.get("theme") or "", style=data.get("style") or "", origin=data.get("origin") or "",
                   why=Why.from_json(data.get("why")), features=data.get("features"),
                   prompt_id=data.get("prompt_id"), feed_item_id=data.get("feed_item_id"))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"prompt": self.prompt, "negative_prompt": self.negative_prompt, "theme": self.theme,
                                "style": self.style, "origin": self.origin, "why": self.why.to_json()}
        if self.origin == "queue" or self.prompt_id is not None:
            data["prompt_id"] = self.prompt_id
        else:  # the taste picker's keys, written as 0.1 did (feed_item_id null for a theme)
            data.update(features=self.features, feed_item_id=self.feed_item_id)
        return data


@dataclass(frozen=True)
class PromptSettings:
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> PromptSettings:
        data = data or {}
        return cls(steps=data.get("steps"), sampler=data.get("sampler"), guidance=data.get("guidance"),
                   width=data.get("width"), height=data.get("height"))

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Variation:
    """"More like this" (``job.variation``): image-to-image from a gallery picture at ``strength``."""

    image: Path
    strength: float
    picture_id: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Variation:
        return cls(image=Path(data["image"]), strength=float(data["strength"]), picture_id=int(data["picture_id"]))

    def to_json(self) -> dict[str, Any]:
        return {"image": str(self.image), "strength": self.strength, "picture_id": self.picture_id}


@dataclass(frozen=True)
class RenderJob:
    """A render job (``job.json``, kind "render"), written once by the daemon before the first worker."""

    render_id: int
    render_kind: RenderKind
    state_dir: Path
    seed: int
    choice: ThemeChoice | None = None
    candidates: tuple[JobCandidate, ...] = ()
    history: tuple[RatedPicture, ...] = ()
    recent_themes: tuple[str, ...] = ()
    deadline: float | None = None  # epoch seconds: the worker picks the steps that fit (absent in 0.1)
    settings: PromptSettings = field(default_factory=PromptSettings)  # a queued prompt's own
    variation: Variation | None = None  # "more like this": img2img from a gallery picture
    kind: Literal["render"] = "render"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RenderJob:
        choice, variation = data.get("choice"), data.get("variation")
        return cls(render_id=data.get("render_id") or 0, render_kind=data.get("render_kind") or "now",
                   state_dir=Path(data["state_dir"]), seed=int(data["seed"]),
                   choice=ThemeChoice.from_json(choice) if choice else None,
                   candidates=tuple(JobCandidate.from_json(c) for c in data.get("candidates") or ()),
                   history=tuple(RatedPicture.from_json(h) for h in data.get("history") or ()),
                   recent_themes=tuple(data.get("recent_themes") or ()), deadline=data.get("deadline"),
                   settings=PromptSettings.from_json(data.get("settings")),
                   variation=Variation.from_json(variation) if variation else None)

    def to_json(self) -> dict[str, Any]:
        data = {"kind": self.kind, "render_kind": self.render_kind, "render_id": self.render_id,
                "state_dir": str(self.state_dir), "seed": self.seed,
                "choice": self.choice.to_json() if self.choice else None,
                "candidates": [c.to_json() for c in self.candidates], "history": [h.to_json() for h in self.history],
                "recent_themes": list(self.recent_themes), "deadline": self.deadline}
        if not self.settings.empty:  # keys only when used: a job without them is byte-for-byte 0.1's
            data["settings"] = self.settings.to_json()
        if self.variation is not None:
            data["variation"] = self.variation.to_json()
        return data


INFO_HINT = "Hold a button again to return to the picture."


@dataclass(frozen=True)
class InfoFacts:
    """What the info screen draws (``job.info``): the worker that draws it reads no database."""

    picture_id: int | None
    image: str | None
    title: str
    prompt: str
    details: tuple[tuple[str, str], ...]
    why: str
    url: str
    # the footer's last line; a pairing code's screen says something else
    hint: str = INFO_HINT

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InfoFacts:
        details = tuple((str(label), str(value)) for label, value in data.get("details") or ())
        return cls(picture_id=data.get("picture_id"), image=data.get("image"), title=data.get("title") or "",
                   prompt=data.get("prompt") or "", details=details, why=data.get("why") or "",
                   url=data.get("url") or "", hint=str(data.get("hint") or INFO_HINT))

    def to_json(self) -> dict[str, Any]:
        data = {"picture_id": self.picture_id, "image": self.image, "title": self.title, "prompt": self.prompt,
                "details": [list(pair) for pair in self.details], "why": self.why, "url": self.url}
        if self.hint != INFO_HINT:  # the info screen's job keeps 0.1's keys (tests/worker/test_formats.py)
            data["hint"] = self.hint
        return data


@dataclass(frozen=True)
class ShowJob:
    """A show job (``job.json``, kind "show"): a stored picture, or the info screen (``info``) drawn
    into ``image`` first."""

    state_dir: Path
    image: Path
    panel: Path | None = None
    info: InfoFacts | None = None
    kind: Literal["show"] = "show"
    # a preview for the phone page instead of a refresh: write what the panel would show to
    # ``preview`` (and a freshly prepared "P" image to ``prepared``, when given); the panel is untouched
    preview: Path | None = None
    prepared: Path | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShowJob:
        info = data.get("info")
        return cls(state_dir=Path(data["state_dir"]), image=Path(data["image"]),
                   panel=optional_path(data.get("panel")), info=InfoFacts.from_json(info) if info else None,
                   preview=optional_path(data.get("preview")), prepared=optional_path(data.get("prepared")))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "state_dir": str(self.state_dir), "image": str(self.image),
                                "panel": path_text(self.panel)}
        if self.info is not None:
            data["info"] = self.info.to_json()
        if self.preview is not None:  # keys only when set: a show job stays what 0.1 wrote
            data.update(preview=str(self.preview), prepared=path_text(self.prepared))
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
