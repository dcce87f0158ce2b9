"""Validation of everything a form or query string sends: lengths, types, ids and redirect targets.

Each function either returns a clean value or raises :class:`FormError` naming the field, which the
views turn into a 400 page (or a message next to the form) with nothing stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from frame.config.checks import plain_text

PROMPT_MAX = 300
NEGATIVE_MAX = 300
THEME_MAX = 100
TOKEN_MAX = 200
PAGE_MAX = 10_000
_DIGITS = re.compile(r"^[0-9]{1,6}$")  # ASCII only: str.isdigit() accepts "²", which int() rejects
_LOCAL_PATH = re.compile(r"^/[A-Za-z0-9/_\-]*(\?[A-Za-z0-9=&_\-]*)?$")


class FormError(ValueError):
    """A submitted value is unusable; ``field`` names it for the message shown to the owner.
    ``problems`` holds every ``(field, message)`` of a form checked as a whole (the first is
    ``field``/``message``), so the page marks each bad field at once."""

    def __init__(self, field: str, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        self.problems = problems or [(field, message)]
        super().__init__("; ".join(f"{name}: {text}" for name, text in self.problems))
        self.field, self.message = self.problems[0]
        self.fields = {name for name, _ in self.problems}


def clean_text(form: Mapping[str, str], field: str, max_chars: int, required: bool = False) -> str:
    """One line of text: control characters rejected, whitespace collapsed, length limited."""
    raw = form.get(field, "")
    if not isinstance(raw, str):
        raise FormError(field, "must be text")
    if len(raw) > max_chars * 4:
        raise FormError(field, f"is too long (at most {max_chars} characters)")
    problem = plain_text(raw)  # the configuration's rule for free text (frame.config.checks)
    if problem:
        raise FormError(field, problem)
    text = " ".join(raw.split())
    if required and not text:
        raise FormError(field, "must not be empty")
    if len(text) > max_chars:
        raise FormError(field, f"is too long ({len(text)} characters, at most {max_chars})")
    return text


def check_blocklist(values: Mapping[str, str], blocklist: tuple[str, ...] | list[str]) -> None:
    """Apply ``feeds.blocklist`` to typed prompts too (case-insensitive substring, like the feeds)."""
    for field, text in values.items():
        lowered = text.lower()
        for word in blocklist:
            if word and word.lower() in lowered:
                raise FormError(field, f"contains {word!r}, which feeds.blocklist forbids")


def parse_rating(value: str | None) -> tuple[str, int]:
    """A rating button's value as the store's (kind, value): like/dislike → thumb ±1, 1–5 → stars."""
    if value == "like":
        return "thumb", 1
    if value == "dislike":
        return "thumb", -1
    if value is not None and value in {"1", "2", "3", "4", "5"}:
        return "stars", int(value)
    raise FormError("rating", "must be like, dislike or 1 to 5 stars")


def parse_page(value: str | None) -> int:
    """A gallery page number from the query string (1 when absent)."""
    if value in (None, ""):
        return 1
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= PAGE_MAX:
        raise FormError("page", f"must be a whole number from 1 to {PAGE_MAX}")
    return int(value)


def safe_next(value: str | None, default: str) -> str:
    """Where to go after a form: only a path on this site (no scheme, host, ``//`` or ``..``)."""
    if value and _LOCAL_PATH.fullmatch(value) and "//" not in value and ".." not in value:
        return value
    return default
