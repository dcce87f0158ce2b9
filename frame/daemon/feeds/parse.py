"""Turning a downloaded feed body into prompts, and sanitising every piece of feed text.

Three formats (schema in ``docs/daemon.md``):

* ``json``: ``{"prompts": [{"prompt": str, "theme"?: str, "negative_prompt"?: str, "weight"?: number > 0,
  "valid_from"?: ISO time, "valid_until"?: ISO time} | str, ...]}``
* ``text``: one prompt per line; empty lines and lines starting with ``#`` are skipped.
* ``rss``: RSS or Atom via ``feedparser``; each entry's title (and summary) fill the source's template.

Feed text is untrusted: it is only ever used as a prompt string (never a shell argument or file name),
entities decoded and markup removed (plain text only), control characters and unpaired surrogates
removed, whitespace collapsed, length capped, and blocklisted items dropped.
"""

from __future__ import annotations

import html
import json
import logging
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from frame.config.checks import MAX_FEED_WEIGHT, feed_template

log = logging.getLogger(__name__)

MAX_ITEM_WEIGHT = 100.0


def combined_weight(item_weight: float, feed_weight: float) -> float:
    """An item's weight times its feed's, capped at the largest the two checks allow (100 × 100).

    The cap holds even when a feed weight never passed the settings check (an older settings file):
    ``1e308 × 100`` was inf, and one inf made every night's choice fail."""
    cap = MAX_ITEM_WEIGHT * MAX_FEED_WEIGHT
    product = float(item_weight) * float(feed_weight)
    return product if product <= cap else cap  # also catches inf and nan (nan <= cap is False)


_TAG = re.compile(r"<[^>]{0,2000}>")
_ANGLE = re.compile(r"[<>]")
_LORA_TAG = re.compile(r"<lora:[\w .\-]{1,100}(?::-?\d{0,3}(?:\.\d{1,4})?){0,2}>", re.IGNORECASE)
_KEPT_BASE, _KEPT_MAX = 0xE000, 32  # private-use characters hold kept tags while the rest is cleaned
_KEPT_CHARS = dict.fromkeys(range(_KEPT_BASE, _KEPT_BASE + _KEPT_MAX))


def _keep(tag: str, kept: list[str]) -> str:
    if len(kept) >= _KEPT_MAX:
        return " "
    kept.append(tag)
    return f" {chr(_KEPT_BASE + len(kept) - 1)} "
_UNESCAPE_ROUNDS = 4
_SPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")


class FeedFormatError(ValueError):
    """The body is not a valid feed of the configured format."""


@dataclass(frozen=True)
class Sanitiser:
    max_chars: int
    blocklist: tuple[str, ...] = ()

    def clean(self, text: Any) -> str:
        """Plain printable single-line text of at most ``max_chars`` (cut at a word boundary), or ''.

        Entities are decoded *before* tags are removed (``&lt;img onerror=...&gt;`` is markup too,
        once decoded), repeatedly for double-encoded text; any ``<``/``>`` left after that goes, so
        no tag can come out. Unpaired surrogates (``"\ud800"`` from a JSON escape) are dropped:
        SQLite cannot store them, and they are not text.
        """
        if not isinstance(text, str):
            return ""
        for _ in range(_UNESCAPE_ROUNDS):
            decoded = html.unescape(text)
            if decoded == text:
                break
            text = decoded
        text = text.translate(_KEPT_CHARS)
        kept: list[str] = []  # A1111's <lora:NAME:SCALE> tags survive (strict form); any other markup goes
        text = _LORA_TAG.sub(lambda m: _keep(m.group(0), kept), text)
        text = _ANGLE.sub(" ", _TAG.sub(" ", text))
        text = "".join("" if unicodedata.category(c) == "Cs" else
                       " " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACE.sub(" ", text)).strip()
        if len(text) > self.max_chars:
            cut = text[: self.max_chars]
            text = (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:")
        for i, tag in enumerate(kept):
            text = text.replace(chr(_KEPT_BASE + i), tag, 1)
        return _SPACE_BEFORE_PUNCT.sub(r"\1", text) if kept else text

    def blocked(self, text: str) -> str | None:
        """The blocklist entry ``text`` contains (case-insensitive), if any."""
        lowered = text.lower()
        return next((word for word in self.blocklist if word.lower() in lowered), None)


def check_template(template: str) -> None:
    """Reject templates with fields other than title/summary/style/theme, attribute access, format
    specs or conversions (the same rule the settings check applies when a feed is saved)."""
    problem = feed_template(template)
    if problem:
        raise FeedFormatError(problem)


def _time(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FeedFormatError(f"{field} must be an ISO 8601 time string")
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise FeedFormatError(f"{field} is not an ISO 8601 time: {value[:40]!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC).isoformat(timespec="seconds")


def _json_item(raw: Any, default_theme: str) -> dict[str, Any]:
    if isinstance(raw, str):
        raw = {"prompt": raw}
    if not isinstance(raw, dict):
        raise FeedFormatError("each prompt must be a string or an object")
    prompt = raw.get("prompt")
    if not isinstance(prompt, str):
        raise FeedFormatError("prompt must be a string")
    weight = raw.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= MAX_ITEM_WEIGHT:
        raise FeedFormatError(f"weight must be a number in (0, {MAX_ITEM_WEIGHT:g}]")
    for key in ("theme", "negative_prompt"):
        if not isinstance(raw.get(key, ""), str):
            raise FeedFormatError(f"{key} must be a string")
    return {"prompt": prompt, "theme": raw.get("theme") or default_theme,
            "negative_prompt": raw.get("negative_prompt", ""), "weight": float(weight),
            "valid_from": _time(raw.get("valid_from"), "valid_from"),
            "valid_until": _time(raw.get("valid_until"), "valid_until")}


def parse_json(text: str, theme: str) -> list[dict[str, Any]]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FeedFormatError(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("prompts"), list):
        raise FeedFormatError('a JSON feed must be an object with a "prompts" list')
    items, skipped = [], 0
    for raw in document["prompts"]:
        try:
            items.append(_json_item(raw, theme))
        except FeedFormatError as exc:
            skipped += 1
            log.warning("feed: skipped a prompt: %s", exc)
    if skipped and not items:
        raise FeedFormatError(f"none of the {skipped} prompts is valid")
    return items


def parse_text(text: str, theme: str) -> list[dict[str, Any]]:
    lines = (line.strip() for line in text.splitlines())
    return [{"prompt": line, "theme": theme} for line in lines if line and not line.startswith("#")]


def parse_rss(body: bytes, theme: str, template: str, styles: tuple[str, ...]) -> list[dict[str, Any]]:
    import feedparser

    check_template(template)
    parsed = feedparser.parse(body)
    if not parsed.entries:
        reason = parsed.get("bozo_exception") if parsed.get("bozo") else "no entries"
        raise FeedFormatError(f"not a usable RSS/Atom feed: {reason}")
    items = []
    for index, entry in enumerate(parsed.entries):
        title = entry.get("title", "")
        if not isinstance(title, str) or not title.strip():
            continue
        values = {"title": title, "summary": entry.get("summary", "") or "",
                  "style": styles[index % len(styles)] if styles else "", "theme": theme}
        items.append({"prompt": template.format_map(values), "theme": theme})
    return items


def parse_feed(body: bytes, fmt: str, *, theme: str, template: str, styles: tuple[str, ...],
               sanitiser: Sanitiser) -> list[dict[str, Any]]:
    """Parse and sanitise a feed body into prompt items; raise FeedFormatError if it is unusable."""
    if fmt == "rss":
        raw_items = parse_rss(body, theme, template, styles)
    else:
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FeedFormatError(f"not valid UTF-8 at byte {exc.start}") from None
        raw_items = parse_json(text, theme) if fmt == "json" else parse_text(text, theme)
    items, seen = [], set()
    for item in raw_items:
        prompt = sanitiser.clean(item["prompt"])
        word = sanitiser.blocked(prompt)
        if not prompt or prompt in seen or word:
            if word:
                log.info("feed: dropped a prompt containing the blocklisted %r", word)
            continue
        seen.add(prompt)
        item.update(prompt=prompt, theme=sanitiser.clean(item.get("theme", "")),
                    negative_prompt=sanitiser.clean(item.get("negative_prompt", "")))
        items.append(item)
    return items
