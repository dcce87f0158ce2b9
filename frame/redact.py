"""Hiding credentials inside URLs wherever a URL is shown (status API, web pages, ``frame config
show``, logs, error messages).

A feed or model URL may carry a secret in its userinfo (``https://user:password@host/``) or in its
query (``?key=...``, ``?token=...``). Whatever the parameter is called, its value may be the secret, so
every query value is replaced, not just the ones whose names look secret; the names stay, so the owner
still recognises the URL. ``redact_url`` handles one URL, ``redact_text`` every URL-like fragment in a
message (requests puts the path and query of the failing URL into its exceptions), ``redact_deep``
every string of a status document.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HIDDEN = "***"
_USERINFO = re.compile(r"(?<=//)[^/?#@\s]+@")
_QUERY_VALUE = re.compile(r"(?<=[?&;])([^=&;#\s'\"<>]*)=[^&;#\s'\"<>)]*")


def redact_url(url: str) -> str:
    """``url`` with its userinfo and every query value replaced by ``***``; other text unchanged."""
    if not isinstance(url, str) or not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 host: fall back to the text rules
        return redact_text(url)
    if not parts.scheme or not parts.netloc and not parts.query:
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{HIDDEN}@{netloc.rpartition('@')[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, _hide_values(parts.query),
                       _hide_values(parts.fragment, bare=False)))


def _hide_values(query: str, bare: bool = True) -> str:
    """``a=1&b=2`` → ``a=***&b=***``; a bare item (``?SECRET``) is hidden whole when ``bare`` (the
    query; a fragment's bare ``#section`` is only an anchor)."""
    if not query:
        return query
    items = re.split(r"([&;])", query)
    return "".join(item if item in "&;" else f"{item.partition('=')[0]}={HIDDEN}" if "=" in item
                   else HIDDEN if bare else item for item in items)


def redact_text(text: str) -> str:
    """Every ``//user:pass@`` and every ``?name=value`` / ``&name=value`` in free text, hidden."""
    if not isinstance(text, str) or not text:
        return text
    text = _USERINFO.sub(f"{HIDDEN}@", text)
    return _QUERY_VALUE.sub(lambda m: f"{m.group(1)}={HIDDEN}", text)


def redact_deep(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, strings) with ``redact_text`` applied to every string, for
    status documents that quote URLs and errors from many places."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, dict):
        return {key: redact_deep(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_deep(value) for value in data]
    return data
