"""Turn plain YAML data into the frozen schema dataclasses, collecting *every* problem at once.

The type hints of the schema are the single source of truth: this walker understands the handful of
shapes the schema uses (str, int, float, bool, ``X | None``, ``Literal``, ``tuple[X, ...]``,
``dict[str, X]`` and nested dataclasses) so that adding a key means adding one line to ``schema.py``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

from frame.config.checks import plain_text
from frame.errors import closest
from frame.redact import redact_url

Path = tuple[str | int, ...]
_MISSING = object()


def format_path(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


class Problems:
    """Collects ``path: message`` lines, adding where each value came from when known; ``items`` keeps
    the same problems as ``(key path, message)`` so a form can put each next to its field."""

    def __init__(self, locate: Callable[[Path], str | None]) -> None:
        self._locate = locate
        self.lines: list[str] = []
        self.items: list[tuple[Path, str]] = []

    def add(self, path: Path, message: str) -> None:
        where = self._locate(path)
        self.lines.append(f"{format_path(path)}: {message}" + (f" ({where})" if where else ""))
        self.items.append((path, message))


def did_you_mean(value: str, known: list[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name, or ``""``: every config problem about an
    unknown name ends the same way."""
    close = closest(value, known)
    return f"; did you mean {close!r}?" if close else ""


def _type_name(tp: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    if tp in names:
        return names[tp]
    if dataclasses.is_dataclass(tp):
        return "a mapping of keys"
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "a list"
    if origin is dict:
        return "a mapping"
    return str(tp)


def _convert(value: Any, tp: Any, path: Path, problems: Problems, secret: bool) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        (inner,) = [t for t in options if t is not type(None)]
        return _convert(value, inner, path, problems, secret)
    if origin is Literal:
        return _convert_literal(value, typing.get_args(tp), path, problems, secret)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            problems.add(path, f"must be a list, got {type(value).__name__}")
            return _MISSING
        item_type = typing.get_args(tp)[0]
        items = [_convert(v, item_type, (*path, i), problems, secret) for i, v in enumerate(value)]
        return _MISSING if _MISSING in items else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            problems.add(path, f"must be a mapping, got {type(value).__name__}")
            return _MISSING
        item_type = typing.get_args(tp)[1]
        items = {str(k): _convert(v, item_type, (*path, str(k)), problems, secret) for k, v in value.items()}
        return _MISSING if _MISSING in items.values() else items
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path, problems)
    return _convert_scalar(value, tp, path, problems, secret)


def _convert_scalar(value: Any, tp: type, path: Path, problems: Problems, secret: bool) -> Any:
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, float) and not math.isfinite(value):
        # YAML's .inf/.nan and JSON's Infinity/NaN: inf passes every minimum, nan every range check
        problems.add(path, f"must be a finite number, got {value!r}")
        return _MISSING
    if tp is str and isinstance(value, str):
        problem = plain_text(value, secret)  # every string: themes, prompts, feed names, paths, URLs
        if problem:
            problems.add(path, problem)
            return _MISSING
        return value
    if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
        return value
    shown = "" if secret else f" {value!r}"
    problems.add(path, f"must be {_type_name(tp)}, got {type(value).__name__}{shown}")
    return _MISSING


def _convert_literal(value: Any, options: tuple, path: Path, problems: Problems, secret: bool) -> Any:
    if value in options and type(value) is type(options[0]):
        return value
    choices = ", ".join(str(o) for o in options)
    hint = ""
    if isinstance(value, str):
        hint = did_you_mean(value, [str(o) for o in options])
    shown = "a secret value" if secret else repr(value)
    problems.add(path, f"must be one of {choices}, got {shown}{hint}")
    return _MISSING


def build(cls: type, data: Any, path: Path, problems: Problems) -> Any:
    """Build dataclass ``cls`` from ``data`` (a mapping), recording problems; defaults fill gaps."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.add(path, f"must be a mapping of keys, got {type(data).__name__}")
        return _MISSING
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key in data:  # in file order, so problems read top to bottom
        spec = fields.get(key)
        if spec is None:
            problems.add((*path, str(key)), f"unknown key{did_you_mean(str(key), list(fields))}")
            continue
        secret = bool(spec.metadata.get("secret"))
        value = _convert(data[key], hints[key], (*path, key), problems, secret)
        if value is _MISSING:
            continue
        check = spec.metadata.get("check")
        message = check(value) if check else None
        if message:
            if spec.metadata.get("secret") == "url" and isinstance(value, str):
                message = message.replace(value, redact_url(value))  # checks echo the value they refuse
            problems.add((*path, key), message)
            continue
        values[key] = value
    return cls(**values)


def hide_secrets(cls: type, plain: Any) -> Any:
    """``plain`` (``dataclasses.asdict`` of a ``cls``) with every field the schema marks secret hidden:
    ``***`` for a whole secret (``""`` stays ``""``), the credential parts of a URL-secret. Walks nested
    sections and lists of them (``feeds.sources``)."""
    if not isinstance(plain, dict):
        return plain
    hints = typing.get_type_hints(cls)
    hidden = dict(plain)
    for spec in dataclasses.fields(cls):
        if spec.name not in hidden:
            continue
        value, marking, tp = hidden[spec.name], spec.metadata.get("secret"), hints[spec.name]
        if marking == "url":
            hidden[spec.name] = redact_url(value) if isinstance(value, str) else value
        elif marking:
            hidden[spec.name] = "***" if value else ""
        elif dataclasses.is_dataclass(tp):
            hidden[spec.name] = hide_secrets(tp, value)
        elif typing.get_origin(tp) is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            hidden[spec.name] = [hide_secrets(typing.get_args(tp)[0], item) for item in value]
    return hidden
