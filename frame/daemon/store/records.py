"""The store's rows as frozen records, and the JSON the API answers with (``to_json``).

``from_row`` takes a row as ``Store`` reads it (``sqlite3.Row`` or its dict, the JSON columns of a
picture already decoded) as it is: the schema types the columns, and what older versions kept in the
JSON columns takes other shapes the API has always passed on, so ``frame.recordcodec.decode``'s checks
(for files and pipes another process wrote) are not applied. ``ROW_READ`` names the columns whose
SQLite form is not the field's. ``to_json`` is ``frame.recordcodec.encode`` with the ``wire(...)``
details of each field, so a new column is declared once; it gives back exactly the keys and values of
today's answers — ``/api/pictures``, ``/api/pictures/<id>``, ``/api/prompts``, the feeds in
``/api/status`` and ``frame status --json`` — which frame.js and owners' scripts read
(``tests/daemon/test_api_answers.py`` compares them with answers captured before these records).

A picture's ``why`` stays a mapping: it is the explanation *as stored* (older pictures hold other
shapes; ``frame.web.present`` reads it tolerantly); ``frame.worker.records.Why`` types what the
worker writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, TypeVar

from frame.recordcodec import encode, wire
from frame.redact import redact_url

RatingKind = Literal["thumb", "stars"]
RenderKind = Literal["night", "now"]
RenderStatus = Literal["running", "done", "failed", "missed"]
R = TypeVar("R", bound="StoreRow")


def now_iso() -> str:
    """UTC timestamp as stored everywhere in the database."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _json_value(text: str | None) -> Any:
    """A JSON column's value (NULL or empty: None)."""
    return json.loads(text) if text else None


def _json_text(value: Any) -> str | None:
    """A mapping as the JSON column's text (empty: None), the form ``frame status --json`` prints."""
    return json.dumps(value) if value else None


class StoreRow:
    """What a store record inherits: ``from_row`` reads a row as it is, ``to_json`` encodes the fields."""

    # a column whose SQLite form is not the field's: how it reads (a flag kept as 0/1, a mapping as JSON text)
    ROW_READ: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    @classmethod
    def from_row(cls: type[R], row: Mapping[str, Any]) -> R:
        """The record from ``row``: a column it lacks reads as None, one a later version added is ignored."""
        data = dict(row)
        values = {field.name: data.get(field.name) for field in fields(cls)}
        for name, read in cls.ROW_READ.items():
            values[name] = read(values[name])
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return encode(self)


@dataclass(frozen=True)
class StoredPicture(StoreRow):
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
    model: str | None = wire(dump=redact_url)  # pictures painted before redaction may hold a model URL
    features: Mapping[str, float] | None
    why: Mapping[str, Any] | None
    timings: Mapping[str, float] | None
    rating_kind: RatingKind | None
    rating_value: int | None
    favourite: bool

    ROW_READ = {"favourite": bool}
    # what the API shows of every picture, in this order; ``detail`` adds why, features and timings
    WIRE_ORDER = ("id", "created_at", "night", "prompt", "negative_prompt", "theme", "style", "origin", "seed",
                  "sampler", "steps", "guidance", "width", "height", "model", "rating_kind", "rating_value",
                  "favourite")

    def to_json(self, detail: bool = False) -> dict[str, Any]:
        """The picture in ``/api/pictures`` (and with ``detail``, ``/api/pictures/<id>``): its columns,
        then the links to its image, then what ``detail`` adds."""
        data = encode(self)
        data["image_url"] = f"/api/pictures/{self.id}/image"
        data["panel_url"] = f"/api/pictures/{self.id}/image?variant=panel" if self.panel_file else None
        if detail:
            data.update(why=self.why, features=self.features, timings=self.timings)
        return data


@dataclass(frozen=True)
class RememberedRating(StoreRow):
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

    ROW_READ = {"candidate": _json_value}


@dataclass(frozen=True)
class QueuedPrompt(StoreRow):
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

    @property
    def size(self) -> str | None:
        """``"WxH"`` when the prompt has its own size."""
        return f"{self.width}x{self.height}" if self.width and self.height else None

    @property
    def variation(self) -> bool:
        return self.source_picture_id is not None

    def to_json(self) -> dict[str, Any]:
        """Its columns; ``failures`` and ``set_aside`` only once a render failed (0.1's answer otherwise):
        the two go together, so the rule is written here rather than as each field's default."""
        data = encode(self)
        if not self.failures and self.set_aside is None:
            del data["failures"], data["set_aside"]
        return data


@dataclass(frozen=True)
class FeedHealth(StoreRow):
    """How a prompt feed's last fetch went (``/api/status``'s ``feeds``; ``from_cache`` 0/1 there)."""

    name: str
    url: str
    last_attempt_at: str | None
    last_ok_at: str | None
    last_error: str | None
    items: int
    from_cache: bool = wire(dump=int)  # as SQLite stores it: what the API has always said

    ROW_READ = {"from_cache": bool}

@dataclass(frozen=True)
class RenderRow(StoreRow):
    """One render attempt (``Store.render``/``renders``/``unfinished_renders``): the status page's
    history, the resume at start, and ``frame status``. ``timings`` is decoded from its JSON column
    and written back as that text: ``frame status --json`` has always printed it so."""

    id: int
    night: str | None
    kind: RenderKind
    status: RenderStatus
    started_at: str
    finished_at: str | None
    restarts: int
    picture_id: int | None
    error: str | None
    timings: Mapping[str, float] | None = wire(dump=_json_text)

    ROW_READ = {"timings": _json_value}


@dataclass(frozen=True)
class ShownEvent(StoreRow):
    """A picture sent to the panel (``Store.last_shown``): what the panel shows after a restart."""

    id: int
    picture_id: int
    shown_at: str
    reason: str
