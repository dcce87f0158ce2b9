"""The store's rows as frozen records, and the JSON the API answers with (``to_json``/``api_json``).

``from_row`` takes a row as ``Store`` reads it (``sqlite3.Row`` or its dict, the JSON columns of a
picture already decoded); ``to_json`` gives back exactly the keys and values of today's answers —
``/api/pictures``, ``/api/pictures/<id>``, ``/api/prompts`` and the feeds in ``/api/status`` — which
frame.js, ``frame status --json`` and owners' scripts read (``tests/daemon/test_api_answers.py``
compares them with answers captured before these records).

A picture's ``why`` stays a mapping: it is the explanation *as stored* (older pictures hold other
shapes; ``frame.web.present`` reads it tolerantly); ``frame.worker.records.Why`` types what the
worker writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Literal

from frame.redact import redact_url

RatingKind = Literal["thumb", "stars"]
RenderKind = Literal["night", "now"]
RenderStatus = Literal["running", "done", "failed", "missed"]


def now_iso() -> str:
    """UTC timestamp as stored everywhere in the database."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _from_row(cls: type, row: Mapping[str, Any]) -> dict[str, Any]:
    """The record's fields from ``row`` (a column a later version added is ignored)."""
    data = dict(row)
    return {field.name: data.get(field.name) for field in fields(cls)}


@dataclass(frozen=True)
class StoredPicture:
    """A picture in the gallery with its latest rating (``Store.picture``)."""

    id: int
    created_at: str
    night: str | None
    file: str
    panel_file: str | None
    bytes: int
    prompt: str
    negative_prompt: str
    theme: str
    style: str
    origin: str
    seed: int | None
    sampler: str | None
    steps: int | None
    guidance: float | None
    width: int | None
    height: int | None
    model: str | None
    features: Mapping[str, float] | None
    why: Mapping[str, Any] | None
    timings: Mapping[str, float] | None
    rating_kind: RatingKind | None
    rating_value: int | None
    favourite: bool

    # what the API shows of every picture, in this order; ``detail`` adds why, features and timings
    PUBLIC = ("id", "created_at", "night", "prompt", "negative_prompt", "theme", "style", "origin", "seed",
              "sampler", "steps", "guidance", "width", "height", "model", "rating_kind", "rating_value",
              "favourite")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StoredPicture:
        values = _from_row(cls, row)
        values["favourite"] = bool(values["favourite"])
        return cls(**values)

    def api_json(self, detail: bool = False) -> dict[str, Any]:
        """The picture in ``/api/pictures`` (and with ``detail``, ``/api/pictures/<id>``)."""
        data = {key: getattr(self, key) for key in self.PUBLIC}
        data["model"] = redact_url(self.model)  # pictures painted before redaction may hold a model URL
        data["image_url"] = f"/api/pictures/{self.id}/image"
        data["panel_url"] = f"/api/pictures/{self.id}/image?variant=panel" if self.panel_file else None
        if detail:
            data.update(why=self.why, features=self.features, timings=self.timings)
        return data


@dataclass(frozen=True)
class RememberedRating:
    """What the taste model keeps of a painted picture the owner deleted (``Store.remembered_ratings``):
    the prompt, theme, style and taste candidate it was made from and its latest rating. Deleting a
    disliked picture must not make the frame forget that it was disliked."""

    picture_id: int
    prompt: str
    theme: str
    style: str
    origin: str
    candidate: Mapping[str, Any] | None
    rating_kind: RatingKind
    rating_value: int
    deleted_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RememberedRating:
        values = _from_row(cls, row)
        values["candidate"] = json.loads(values["candidate"]) if values["candidate"] else None
        return cls(**values)


@dataclass(frozen=True)
class QueuedPrompt:
    """A prompt an owner queued for a coming night (``/api/prompts``), in queue order (``position``).

    ``steps`` … ``height`` None: the night's setting; ``seed`` None: a random seed. A "more like this"
    variation names its gallery picture (``source_picture_id``) and img2img ``strength``. A prompt whose
    renders failed ``failures`` times is ``set_aside`` (the reason): listed, not painted, until edited."""

    id: int
    prompt: str
    negative_prompt: str
    theme: str
    created_at: str
    used_at: str | None
    picture_id: int | None
    position: int | None = None
    steps: int | None = None
    sampler: str | None = None
    guidance: float | None = None
    seed: int | None = None
    width: int | None = None
    height: int | None = None
    source_picture_id: int | None = None
    strength: float | None = None
    failures: int = 0  # renders that failed painting it (reset by an edit)
    set_aside: str | None = None  # why it is no longer tried (after SET_ASIDE_AFTER failures); None: waiting

    # the columns an owner may set (``Store.queue_prompt`` / ``Store.update_prompt``)
    EDITABLE = ("prompt", "negative_prompt", "theme", "steps", "sampler", "guidance", "seed", "width", "height",
                "strength")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> QueuedPrompt:
        return cls(**_from_row(cls, row))

    @property
    def size(self) -> str | None:
        """``"WxH"`` when the prompt has its own size."""
        return f"{self.width}x{self.height}" if self.width and self.height else None

    @property
    def variation(self) -> bool:
        return self.source_picture_id is not None

    def to_json(self) -> dict[str, Any]:
        """Its columns; ``failures`` and ``set_aside`` only once a render failed (0.1's answer otherwise)."""
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        if not self.failures and self.set_aside is None:
            del data["failures"], data["set_aside"]
        return data


@dataclass(frozen=True)
class FeedHealth:
    """How a prompt feed's last fetch went (``/api/status``'s ``feeds``; ``from_cache`` 0/1 there)."""

    name: str
    url: str
    last_attempt_at: str | None
    last_ok_at: str | None
    last_error: str | None
    items: int
    from_cache: bool

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FeedHealth:
        values = _from_row(cls, row)
        values["from_cache"] = bool(values["from_cache"])
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        data["from_cache"] = int(self.from_cache)  # as SQLite stores it: what the API has always said
        return data



@dataclass(frozen=True)
class RenderRow:
    """One render attempt (``Store.render``/``renders``/``unfinished_renders``): the status page's
    history, the resume at start, and ``frame status``. ``timings`` is decoded from its JSON column."""

    id: int
    night: str | None
    kind: RenderKind
    status: RenderStatus
    started_at: str
    finished_at: str | None
    restarts: int
    picture_id: int | None
    error: str | None
    timings: Mapping[str, float] | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RenderRow:
        values = _from_row(cls, row)
        values["timings"] = json.loads(values["timings"]) if values["timings"] else None
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """The row as ``frame status --json`` has always printed it (``timings`` as its stored JSON text)."""
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        data["timings"] = json.dumps(self.timings) if self.timings else None
        return data


@dataclass(frozen=True)
class ShownEvent:
    """A picture sent to the panel (``Store.last_shown``): what the panel shows after a restart."""

    id: int
    picture_id: int
    shown_at: str
    reason: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ShownEvent:
        return cls(**_from_row(cls, row))

    def to_json(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}
