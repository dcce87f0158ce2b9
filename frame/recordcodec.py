"""One codec for the frozen records the processes exchange: a record is declared
once, as a dataclass, and ``encode``/``decode`` read its fields, so a new field is written in one place.

The records come from files and pipes another process wrote, so ``decode`` trusts nothing: each value
is checked against the field's annotation (str, int, float, bool, Path, Literal, ``X | None``,
``tuple[X, ...]``, ``tuple[X, Y]``, ``Mapping[str, X]``, a nested record), a missing required key, a
wrong type or an oversize list raises ``RecordError`` naming the record and the field, and nothing
is looked up by name or evaluated from the data. Unknown keys are ignored: a file from a later
version still reads (the compatibility rule of ``frame.worker.records``).

Per-field wire details of the 0.1 format go in ``wire(...)`` metadata: another key, a key left out
when the value is None or the default, a null or empty value read as the default (0.1's
``data.get(key) or default``), a conversion after the check (``float`` for a weight 0.1 wrote as 1),
and one before writing (``dump``: the form a reader outside Python has always been given, a flag as
0/1, a mapping as its JSON text; ``decode`` does not undo it, so a record with one is written, not read
back). A class may set ``WIRE_ORDER`` (field names) when 0.1 wrote its keys in another order than the
fields; a field it leaves out is not written (an API answer that shows only some of a row's columns).

Base layer, standard library only: the daemon imports the records.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

R = TypeVar("R")
MAX_ITEMS = 100_000  # a list longer than this in a record is refused, not built
_MISSING: Any = object()


class RecordError(ValueError):
    """A record's JSON is not what the record declares (names the record and the field)."""


_PLAIN = {"key": None, "omit_none": False, "omit_default": False, "or_default": False, "convert": None,
          "dump": None, "max_items": MAX_ITEMS, "absent": _MISSING}  # a field declared without ``wire``


def wire(default: Any = dataclasses.MISSING, *, key: str | None = None, omit_none: bool = False,
         omit_default: bool = False, or_default: bool = False, convert: Callable[[Any], Any] | None = None,
         dump: Callable[[Any], Any] | None = None, max_items: int = MAX_ITEMS,
         default_factory: Any = dataclasses.MISSING, absent: Any = _MISSING) -> Any:
    """A dataclass field with its wire details (see the module docstring); ``absent`` is what a
    missing key reads as for a field the constructor requires, ``dump`` what ``encode`` writes instead
    of the value (``omit_none``/``omit_default`` look at the value itself)."""
    meta = {"key": key, "omit_none": omit_none, "omit_default": omit_default, "or_default": or_default,
            "convert": convert, "dump": dump, "max_items": max_items, "absent": absent}
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"wire": meta})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The record's resolved field annotations: resolved once per class, not per decoded record (a
    night decodes an event per step)."""
    return typing.get_type_hints(cls)


def _meta(f: dataclasses.Field) -> dict[str, Any]:
    return f.metadata.get("wire") or _PLAIN


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _MISSING


def _ordered(cls: type) -> list[dataclasses.Field]:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    order = getattr(cls, "WIRE_ORDER", None) or tuple(fields)
    return [fields[name] for name in order]


def encode_value(value: Any) -> Any:
    """A field's value as JSON: records encoded, tuples as lists, Paths as text, mappings copied."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_json = getattr(value, "to_json", None)
        return to_json() if to_json is not None else encode(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [encode_value(item) for item in value]
    if isinstance(value, Mapping):
        return {key: encode_value(item) for key, item in value.items()}
    return value


def encode(record: Any) -> dict[str, Any]:
    """The record's JSON object, its keys in field (or ``WIRE_ORDER``) order."""
    data: dict[str, Any] = {}
    for f in _ordered(type(record)):
        meta, value = _meta(f), getattr(record, f.name)
        if meta["omit_none"] and value is None:
            continue
        if meta["omit_default"] and value == _default(f):
            continue
        data[meta["key"] or f.name] = encode_value(meta["dump"](value) if meta["dump"] else value)
    return data


def decode(cls: type[R], data: Any) -> R:
    """A ``cls`` record from its JSON object, every value checked against its field's annotation."""
    name = cls.__name__
    if not isinstance(data, Mapping):
        raise RecordError(f"{name}: not a JSON object but {type(data).__name__}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        meta = _meta(f)
        key = meta["key"] or f.name
        raw = data.get(key, _MISSING)
        default = _default(f)
        if raw is _MISSING or (meta["or_default"] and not raw and raw is not False):
            if meta["absent"] is not _MISSING:
                values[f.name] = meta["absent"]
            elif default is _MISSING:
                raise RecordError(f"{name}.{key}: required, missing")
            continue
        value = _check(raw, hints[f.name], f"{name}.{key}", meta["max_items"])
        values[f.name] = meta["convert"](value) if meta["convert"] else value
    return cls(**values)


class Record:
    """What a codec record inherits: ``to_json``/``from_json`` through ``encode``/``decode``."""

    def to_json(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_json(cls: type[R], data: Any) -> R:
        return decode(cls, data)


def _check(value: Any, hint: Any, where: str, max_items: int) -> Any:
    """``value`` as the annotation ``hint`` declares it, else ``RecordError`` naming ``where``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        errors = []
        for option in options:
            try:
                return _check(value, option, where, max_items)
            except RecordError as exc:
                errors.append(str(exc))
        raise RecordError(errors[0] if len(errors) == 1 else f"{where}: none of {hint} fits {_shown(value)}")
    if origin is typing.Literal:
        if isinstance(value, str | int) and not isinstance(value, bool) and value in args:
            return value
        raise RecordError(f"{where}: {_shown(value)} is not one of {list(args)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise RecordError(f"{where}: expected a list, got {type(value).__name__}")
        if len(value) > max_items:
            raise RecordError(f"{where}: {len(value):,} items, more than {max_items:,}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_check(item, args[0], f"{where}[{i}]", max_items) for i, item in enumerate(value))
        if len(value) != len(args):
            raise RecordError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_check(item, arg, f"{where}[{i}]", max_items) for i, (item, arg) in enumerate(zip(value, args)))
    if origin in (Mapping, dict) or hint is dict:
        if not isinstance(value, Mapping):
            raise RecordError(f"{where}: expected an object, got {type(value).__name__}")
        if len(value) > max_items:
            raise RecordError(f"{where}: {len(value):,} keys, more than {max_items:,}")
        item_hint = args[1] if len(args) == 2 else Any
        return {str(k): _check(v, item_hint, f"{where}.{k}", max_items) for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        from_json = getattr(hint, "from_json", None)
        return from_json(value) if from_json is not None else decode(hint, value)
    if hint is Path:
        if isinstance(value, str) and value:
            return Path(value)
        raise RecordError(f"{where}: expected a path, got {_shown(value)}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value  # an int stays an int: 0.1 wrote "guidance": 7 and reads it back so
        raise RecordError(f"{where}: expected a number, got {_shown(value)}")
    if hint in (str, int, bool):
        if isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
            return value
        raise RecordError(f"{where}: expected {hint.__name__}, got {_shown(value)}")
    raise RecordError(f"{where}: the codec cannot read a {hint}")  # a declaration the codec lacks


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'…' if len(text) > 40 else ''}"
