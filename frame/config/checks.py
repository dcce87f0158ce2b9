"""Value checks used by the schema: each takes an already type-checked value and returns an error
message, or ``None`` when the value is fine. Kept apart from the schema so the rules read as a list."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from frame.errors import closest

_CLOCK = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_SIZE = re.compile(r"^(\d+)x(\d+)$")
BUTTON_ACTIONS = ("like", "dislike", "next", "previous", "info", "none")


def known_name(kind: str, names: Iterable[str]) -> Callable[[str], str | None]:
    """A check for a name from a table (``display.panel``: the panel table's rows): ``unknown panel 'x';
    did you mean 'y'?``, or the known names when none is close."""
    known = list(names)

    def check(value: str) -> str | None:
        if value in known:
            return None
        close = closest(value, known)
        hint = f"; did you mean {close!r}?" if close else f" (known: {', '.join(known)})"
        return f"unknown {kind} {value!r}{hint}"

    return check


def positive(value) -> str | None:
    return None if value is None or value > 0 else f"must be greater than 0, got {value}"


MAX_FEED_WEIGHT = 100.0  # a feed item's own weight has the same upper end (daemon/feeds/parse.py)


def feed_weight(value) -> str | None:
    """A feed's weight: more than 0, at most 100. ``1e308`` once passed ``positive`` and, times an
    item's own weight 100, overflowed to inf, which broke every night's choice."""
    if value is None or 0 < value <= MAX_FEED_WEIGHT:
        return None
    return f"must be more than 0 and at most {MAX_FEED_WEIGHT:g}, got {value}"


TEMPLATE_FIELDS = frozenset({"title", "summary", "style", "theme"})


def feed_template(value: str) -> str | None:
    """A feed template: plain ``{title}``, ``{summary}``, ``{style}``, ``{theme}`` fields only. No
    attribute or index access (``{0.__class__.__mro__}``), format spec (``{title:>999999999}`` asks
    for a gigabyte) or conversion. The feed parser applies this same rule to every fetch."""
    allowed = ", ".join("{" + name + "}" for name in sorted(TEMPLATE_FIELDS))
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        return f"is not a valid template ({exc}); use {allowed}, and {{{{ }}}} for a literal brace"
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in TEMPLATE_FIELDS or spec or conversion:
            shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            return f"template field {{{shown[:60]}}} is not allowed; use {allowed}"
    return None


def blocklist(value: tuple[str, ...]) -> str | None:
    """Blocked words: an empty (or all-space) entry is contained in every prompt, so it would block
    every feed prompt and every queued one."""
    for number, word in enumerate(value, 1):
        if not word.strip():
            return f"entry {number} is empty, which would block every prompt; remove it"
    return None


def lora_scale(value) -> str | None:
    return None if -10.0 <= value <= 10.0 else "must be between -10 and 10 (A1111's LoRA weight, 1 = as trained)"


def non_empty_text(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def non_negative(value) -> str | None:
    return None if value is None or value >= 0 else f"must be 0 or more, got {value}"


MINUTES_A_YEAR = 525_600  # the longest interval: a timedelta and APScheduler's timers hold it


def within(low: int, high: int) -> Callable[[int | None], str | None]:
    """A check for ``low <= value <= high``. The upper end keeps a number inside what its user holds:
    ``rotate_favourites_minutes: 10**20`` once passed ``non_negative`` and then crashed the daemon's
    scheduler (OverflowError), and SQLite's integers end at 2**63."""
    def check(value: int | None) -> str | None:
        return None if value is None or low <= value <= high else f"must be from {low} to {high}, got {value}"
    return check


MAX_GUIDANCE = 30.0  # AUTOMATIC1111's CFG slider ends here; far above it every model paints noise


def guidance(value: float | None) -> str | None:
    """Classifier-free guidance from 0 to ``MAX_GUIDANCE``: the one limit the configuration, the settings
    page and the queue (``frame.daemon.queue``) share."""
    if value is None or 0 <= value <= MAX_GUIDANCE:
        return None
    return f"must be from 0 to {MAX_GUIDANCE:g}, got {value:g}"


# Typed text may hold tab, CR and LF (whitespace) but none of these: control characters (Cc: NUL, ESC,
# DEL), format characters (Cf: the bidi overrides U+202A-U+202E and isolates U+2066-U+2069, which make
# text read differently from what it holds, zero-width spaces), unpaired surrogates (Cs: not text,
# SQLite cannot store them) and private-use characters (Co: no meaning a model learned).
_REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Co")
# whitespace, and the zero-width (non-)joiner: format characters that real text needs (emoji such as
# 👨‍👩‍👧, Persian and Indic scripts), unlike the bidi overrides and invisible spaces the rule is for
_ALLOWED_CONTROLS = "\t\r\n\u200c\u200d"


def control_character(text: str) -> str | None:
    """The first character of ``text`` that typed text must not hold, or None."""
    return next((c for c in text if unicodedata.category(c) in _REFUSED_CATEGORIES and c not in _ALLOWED_CONTROLS),
                None)


def plain_text(value: str, secret: bool = False) -> str | None:
    """The rule for every free-text value, in the configuration and on the queue form alike
    (``frame.web.forms.clean_text``): the problem names the character (not for a secret's value)."""
    found = control_character(value)
    if found is None:
        return None
    if secret:
        return "contains a control character"
    name = unicodedata.name(found, "")
    return f"contains a control character U+{ord(found):04X}" + (f" ({name})" if name else "")


def unit_interval(value) -> str | None:
    return None if value is None or 0.0 <= value <= 1.0 else f"must be between 0 and 1, got {value}"


def nice_value(value) -> str | None:
    return None if 0 <= value <= 19 else f"must be a nice level from 0 to 19, got {value}"


def clock_time(value: str) -> str | None:
    return None if _CLOCK.match(value) else f"must be a 24-hour time HH:MM, got {value!r}"


def time_range_or_empty(value: str) -> str | None:
    if value == "":
        return None
    parts = value.split("-")
    if len(parts) == 2 and all(_CLOCK.match(p.strip()) for p in parts):
        return None
    return f"must be empty or a range HH:MM-HH:MM, got {value!r}"


def size(value: str) -> str | None:
    match = _SIZE.match(value)
    if not match:
        return f"must be WIDTHxHEIGHT in pixels like 800x480, got {value!r}"
    if int(match[1]) == 0 or int(match[2]) == 0:
        return f"width and height must be positive, got {value!r}"
    return None


def size_or_auto(value: str) -> str | None:
    if value == "auto":
        return None
    problem = size(value)
    if problem:
        return f"must be 'auto' or WIDTHxHEIGHT like 512x320, got {value!r}"
    return None  # the multiple a side must be is the model's (frame.diffusion.rules, the deep checks)


def remote_size_or_auto(value: str) -> str | None:
    """A render server's size: its model is not here to ask, and the AUTOMATIC1111 API takes sides in
    multiples of 8 (the VAE's), so that is the rule checked."""
    problem = size_or_auto(value)
    if problem or value == "auto":
        return problem
    width, height = (int(v) for v in value.split("x"))
    if width % 8 or height % 8:
        return f"width and height must be multiples of 8 for a render server, got {value!r}"
    return None


def http_url(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"must be an http(s) URL, got {value!r}"
    return None


def http_url_or_empty(value: str) -> str | None:
    return None if value == "" else http_url(value)


def model_source(value: str) -> str | None:
    if value == "demo" or "://" not in value:
        return None  # "demo" or a folder; the folder's existence is checked when the model loads
    return http_url(value)


def tiny_vae(value: str) -> str | None:
    """``model.vae_decoder``: "" (the model's own VAE), taesd, taesdxl, or a folder/URL of a tiny VAE."""
    if value in ("", "taesd", "taesdxl") or "://" not in value:
        return control_character(value)
    return http_url(value)


def host_port(value: str) -> str | None:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"must be HOST:PORT like 0.0.0.0:8080, got {value!r}"
    return None


def host_names(value: tuple[str, ...]) -> str | None:
    """``web.hosts``: host names without scheme, port or path (``frame.example.org``), or ``"*"``."""
    for name in value:
        if name == "*":
            continue
        labels = name.rstrip(".").split(".")
        if not name or not all(label and len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
                               for label in labels):
            return f"must be host names like frame.example.org (no scheme, port or path) or \"*\", got {name!r}"
    return None


def broker_host(value: str) -> str | None:
    """``mqtt.host``: a host name or address without scheme, port or path ("" = MQTT off)."""
    if value and (any(c in value for c in "/:@ ") or not value.isascii()) and not _IPV6.match(value):
        return f"must be a host name or address like homeassistant.local (no scheme, port or path), got {value!r}"
    return None


_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")
_MQTT_TOPIC_LEVEL = re.compile(r"^[A-Za-z0-9_-]+$")


def mqtt_topic(value: str) -> str | None:
    """``mqtt.base_topic`` and ``discovery_prefix``: levels of letters, digits, ``_`` and ``-`` joined by
    ``/``. No wildcard (``+``, ``#``), no leading ``$`` (the broker's own topics), no empty level."""
    if not value or not all(_MQTT_TOPIC_LEVEL.match(level) for level in value.split("/")):
        return f"must be topic levels of letters, digits, _ and - separated by / (like frame), got {value!r}"
    return None


MAX_MQTT_CREDENTIAL = 1024  # MQTT's length fields hold 65535; a longer one is a mistake


def mqtt_credential(value: str) -> str | None:
    return None if len(value.encode()) <= MAX_MQTT_CREDENTIAL else f"must be at most {MAX_MQTT_CREDENTIAL} bytes"


def token(value: str) -> str | None:
    if value and len(value) < 12:
        return "must be empty (generated at first start) or at least 12 characters"
    if any(c.isspace() for c in value):
        return "must not contain whitespace"
    if not all("!" <= c <= "~" for c in value):  # HTTP carries it as latin-1: anything else never matches
        return "must be printable ASCII (letters, digits, punctuation; no accents or other scripts)"
    return None


def bearer_token(value: str) -> str | None:
    """A token sent in an HTTP header: printable ASCII without spaces (any length; empty = none)."""
    if not all("!" <= c <= "~" for c in value):
        return "must be printable ASCII without spaces (it is sent in an HTTP header)"
    return None


def timezone(value: str) -> str | None:
    if value == "local":
        return None

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {value!r} (use an IANA name like Europe/Berlin, or 'local')"
    return None


def non_empty_list(value) -> str | None:
    return None if len(value) > 0 else "must list at least one entry"


def axes(value: dict) -> str | None:
    for name, ends in value.items():
        if len(ends) != 2:
            return f"axis {name!r} must be a pair [low text, high text], got {len(ends)} entries"
    return None


def button_pins(value: dict) -> str | None:
    for pin, action in value.items():
        if not str(pin).isdigit() or not 0 <= int(pin) <= 27:
            return f"pin {pin!r} must be a BCM GPIO number from 0 to 27"
        if action not in BUTTON_ACTIONS:
            return f"pin {pin}: unknown action {action!r} (choose from {', '.join(BUTTON_ACTIONS)})"
    return None
