"""The settings form's fields as typed values, and the page's view of them.

A browser sends strings; this turns each field's string into the type the schema wants (numbers,
lists one item a line, ``None`` for an empty "automatic" field, the feed rows) before the same
checks as ``frame config check`` run on it (``frame.daemon.settings``). A string that is not a number
at all is refused here, next to its field, with a sentence instead of a type name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frame.config import fields as owner_fields
from frame.config.fields import FEED_KEYS, Field

MAX_FEEDS = 20
APPLIES = {"now": "applies at once", "next render": "from the next render", "restart": "needs a restart"}


def feed_name(index: int, key: str) -> str:
    return f"feeds.sources-{index}-{key}"


def parse_form(form: Mapping[str, str], locked: set[str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(field key → typed value, field key → problems) for every field on the form that an
    environment variable does not fix (those are shown disabled, so the browser sends nothing)."""
    changes: dict[str, Any] = {}
    problems: dict[str, list[str]] = {}
    for spec in owner_fields.FIELDS:
        if spec.key in locked:
            continue
        try:
            if spec.kind == "feeds":
                changes[spec.key] = _feeds(form)
            elif spec.kind == "bool":
                changes[spec.key] = form.get(spec.key) == "on"
            elif spec.key in form:
                changes[spec.key] = _value(spec, str(form[spec.key]))
        except ValueError as exc:
            problems.setdefault(spec.key, []).append(str(exc))
    return changes, problems


def _value(spec: Field, raw: str) -> Any:
    text = raw.strip()
    if spec.kind == "lines":
        return [line.strip() for line in raw.splitlines() if line.strip()]
    if spec.kind in ("int", "float", "select") and text == "" and spec.optional:
        return None
    if spec.kind == "int":
        if not text.lstrip("-").isdigit() or not text.isascii():
            raise ValueError(f"must be a whole number, got {text!r}")
        return int(text)
    if spec.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"must be a number, got {text!r}") from None
    if spec.kind == "select":
        return next((choice for choice in spec.choices if str(choice) == text), text)
    if spec.kind == "secret":
        return raw  # whitespace is the secret's own; empty keeps the stored one
    return text


def _feeds(form: Mapping[str, str]) -> list[dict[str, Any]]:
    """The feed rows; a row whose URL is empty is dropped (how a feed is removed)."""
    rows = []
    for index in range(MAX_FEEDS + 1):
        if feed_name(index, "url") not in form:
            break
        row: dict[str, Any] = {key: str(form.get(feed_name(index, key), "")).strip() for key in FEED_KEYS}
        if not row["url"]:
            continue
        try:
            row["weight"] = float(row["weight"] or 1.0)
        except ValueError:
            raise ValueError(f"feed {index + 1}: weight must be a number, got {row['weight']!r}") from None
        rows.append(row)
    return rows


def form_rows(current: dict[str, Any], submitted: Mapping[str, Any] | None) -> list[tuple[str, list[dict]]]:
    """The groups of fields as the template draws them: value (what was sent, after a refused save),
    origin, locked, when it applies."""
    rows = []
    for group, specs in owner_fields.groups():
        items = []
        for spec in specs:
            info = current["values"][spec.key]
            value = info["value"]
            if submitted is not None and spec.key in submitted and spec.kind != "secret":
                value = submitted[spec.key]
            items.append({"spec": spec, "value": _display(spec, value), "origin": info["origin"],
                          "locked": info["locked"], "set": info["set"], "applies": APPLIES[spec.applies],
                          "id": "f-" + spec.key.replace(".", "-")})
        rows.append((group, items))
    return rows


def _display(spec: Field, value: Any) -> Any:
    if spec.kind == "lines":
        return "\n".join(str(v) for v in value or [])
    if spec.kind == "feeds":
        return list(value or []) + [dict.fromkeys(FEED_KEYS, "") | {"format": "json", "weight": 1.0}]
    if value is None:
        return ""
    return value
