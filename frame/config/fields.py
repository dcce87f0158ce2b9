"""The owner-facing settings: which keys the phone's settings page edits, in which group, with which
input, and when a change takes effect.

The input kind and the choices of a select list come from the schema's type hints (``Literal`` name
lists such as ``SamplerName``, ``DitherName``, ``FitName``, which the registries are checked
against), so a new sampler or dither shows up on the page without touching this table. ``applies``:

* ``now`` — the running daemon takes it over at once (schedule, quiet hours, feeds, panel options);
* ``next render`` — read when the next render starts (model, steps, themes, gallery limits);
* ``restart`` — read only at start (buttons, log level); the page offers a restart.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from frame.config import checks
from frame.config.panels import panel_names
from frame.config.schema import Config

Applies = Literal["now", "next render", "restart"]
Kind = Literal["text", "time", "int", "float", "bool", "select", "lines", "secret", "feeds"]


@dataclass(frozen=True)
class Field:
    """One setting on the page: ``path`` in the configuration, the widget (``kind``, ``choices``),
    whether empty means "automatic" (``optional``) and when it applies."""

    path: tuple[str, ...]
    group: str
    label: str
    applies: Applies
    kind: Kind
    help: str = ""
    optional: bool = False
    choices: tuple[Any, ...] = ()
    url_secret: bool = False
    minimum: float | None = None
    maximum: float | None = None
    step: str = ""

    @property
    def key(self) -> str:
        return ".".join(self.path)


def _schema_field(path: tuple[str, ...]) -> tuple[Any, dataclasses.Field]:
    cls: Any = Config
    for part in path[:-1]:
        cls = typing.get_type_hints(cls)[part]
    spec = {f.name: f for f in dataclasses.fields(cls)}[path[-1]]
    return typing.get_type_hints(cls)[path[-1]], spec


def _describe(tp: Any) -> tuple[Kind, bool, tuple[Any, ...]]:
    """(kind, optional, choices) from a schema type hint."""
    optional = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        optional = type(None) in typing.get_args(tp)
        (tp,) = [t for t in typing.get_args(tp) if t is not type(None)]
    if typing.get_origin(tp) is Literal:
        return "select", optional, typing.get_args(tp)
    if typing.get_origin(tp) is tuple:
        return "lines", optional, ()
    names: dict[Any, Kind] = {bool: "bool", int: "int", float: "float", str: "text"}
    return names[tp], optional, ()


def field(key: str, group: str, label: str, applies: Applies, help: str = "", *, kind: Kind | None = None,
          choices: tuple[Any, ...] | None = None, **limits: Any) -> Field:
    """``choices``: a select list for a ``str`` setting whose names a registry holds (the panels)."""
    path = tuple(key.split("."))
    tp, spec = _schema_field(path)
    derived, optional, derived_choices = _describe(tp)
    secret = spec.metadata.get("secret")
    if secret is True:
        derived = "secret"
    if choices is not None:
        derived, derived_choices = "select", choices
    return Field(path, group, label, applies, kind or derived, help, optional, derived_choices,
                 url_secret=secret == "url", **limits)


NOW, NEXT, RESTART = "now", "next render", "restart"

FIELDS: tuple[Field, ...] = (
    field("schedule.render_at", "Schedule", "Start painting at", NOW, "The night's render starts here.", kind="time"),
    field("schedule.deadline", "Schedule", "Finish painting by", NOW,
          "The render window ends here; the steps are chosen to fit.", kind="time"),
    field("schedule.show_at", "Schedule", "Show the new picture at", NOW, kind="time"),
    field("schedule.quiet_hours", "Schedule", "Quiet hours", NOW,
          "HH:MM-HH:MM; the panel does not refresh then. Empty: never quiet."),
    field("schedule.timezone", "Schedule", "Time zone", NOW, "An IANA name like Europe/Berlin, or local."),
    field("schedule.rotate_favourites_minutes", "Schedule", "Show an older favourite every … minutes", NOW,
          "0: keep tonight's picture all day.", minimum=0, maximum=525_600),
    field("taste.themes", "Themes", "Themes", NEXT, "One per line: what the pictures are of."),
    field("taste.styles", "Themes", "Styles", NEXT, "One per line: how they are painted."),
    field("taste.explore_rate", "Themes", "Surprise me", NEXT,
          "0 to 1: how often a picture ignores your ratings.", minimum=0, maximum=1, step="0.05"),
    field("model.negative_prompt", "Themes", "Never paint", NEXT, "The negative prompt."),
    field("feeds.sources", "Feeds", "Prompt feeds", NOW, "Each feed's prompts join the themes.", kind="feeds"),
    field("feeds.refresh_minutes", "Feeds", "Fetch feeds every … minutes", NOW, minimum=1, maximum=525_600),
    field("feeds.blocklist", "Feeds", "Blocked words", NOW, "One per line; prompts containing one are dropped."),
    field("display.panel", "Panel", "Panel type", NOW,
          "The e-paper panel on the frame (virtual: none, pictures are written as PNGs); the picture on it "
          "is shown again with the new type.", choices=tuple(panel_names())),
    field("display.saturation", "Panel", "Saturation", NOW,
          "0 to 1; empty: the panel's own value.", minimum=0, maximum=1, step="0.05"),
    field("display.dither", "Panel", "Dither", NOW, "auto: the panel's usual method."),
    field("display.fit", "Panel", "Fit", NOW, "cover crops, contain adds bars, blur-pad fills them blurred."),
    field("display.rotate", "Panel", "Rotation (degrees)", NOW),
    field("model.source", "Model", "Model", NEXT, "demo, a model folder on the frame, or an http(s) URL."),
    field("model.weights", "Model", "Weights", NEXT,
          "How weights are read; their precision (fp16, uint8) is the model folder's own."),
    field("model.token", "Model", "Model server token", NEXT, "Leave empty to keep the current one."),
    field("model.vae_decoder", "Model", "Tiny VAE", NEXT,
          "Empty: the model's own VAE (the default). taesd (SD 1.x/2.x) or taesdxl (SDXL), once imported with "
          "'frame model import --tiny-vae', or its folder: the decode is many times faster, the picture a "
          "little softer."),
    field("model.sampler", "Painting", "Sampler", NEXT),
    field("model.noise", "Painting", "Random numbers", NEXT,
          "frame: as older pictures. torch-cpu: a seed paints what it paints in ComfyUI or diffusers; "
          "a1111-nv: what it paints in A1111 (RNG NV, or GPU on an NVidia card)."),
    field("model.steps", "Painting", "Steps", NEXT, "Empty: the largest count that fits the window.", minimum=1),
    field("model.guidance", "Painting", "Guidance", NEXT, "Empty: the model's default.", minimum=0,
          maximum=checks.MAX_GUIDANCE, step="0.5"),
    field("model.size", "Painting", "Size", NEXT, ("auto, or WIDTHxHEIGHT like 512x320 in the model's multiples: "
                                                "16 px for the demo, 64 for SD 1.5 and SDXL.")),
    field("gallery.max_pictures", "Gallery", "Keep at most … pictures", NEXT, minimum=1, maximum=10_000_000),
    field("gallery.max_disk_mb", "Gallery", "Keep at most … MB of pictures", NEXT, minimum=1, maximum=100_000_000),
    field("buttons.enabled", "Frame", "Buttons on the frame", RESTART),
    field("logging.level", "Frame", "Log level", RESTART),
)

FEED_KEYS = ("url", "format", "name", "template", "theme", "weight")


def by_key() -> dict[str, Field]:
    return {f.key: f for f in FIELDS}


def groups() -> list[tuple[str, list[Field]]]:
    """The fields by group, in table order."""
    grouped: dict[str, list[Field]] = {}
    for spec in FIELDS:
        grouped.setdefault(spec.group, []).append(spec)
    return list(grouped.items())
