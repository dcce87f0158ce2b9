"""How model URLs are fetched: timeouts, how long to keep retrying, the bearer token, the weight cache.

One ``HttpSettings`` value describes it: plain typed fields, never the configuration (which
``frame.diffusion.configured.http_settings_for`` turns into this value, above the engine). The pipeline
passes it explicitly to ``ModelFiles`` and to its loader; the loader makes it
current (``using``) while the engine loads a component, so every ``SourcePool`` the engine opens on
the way (structure scan, weights provider, VAE shape probe) picks it up when it is created, without
threading one more argument through each of them. A ``SourcePool`` keeps what was current when it was
made, so the prefetch thread (which has no context of its own) uses the same settings.

Retries are bounded by time, not by count: a NAS that sleeps for a minute at the start of the night,
or Wi-Fi that drops for half a minute mid-step, costs waiting, not the night. ``give_up_seconds`` of
failures in a row end the render with a clear error (the daemon then restarts the worker, which
resumes from the last finished step).

The token is sent only to the origin (scheme, host, port) of the configured model URL, never to
another host a URL might point at.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from frame.clock import SystemClock


@dataclass(frozen=True)
class HttpSettings:
    """``timeout``: seconds per request to connect and between received bytes; ``give_up_seconds``:
    how long failures in a row are retried; ``backoff``: first wait, doubled per attempt up to
    ``max_backoff``; ``retries``: optional cap on the number of retries as well. ``cache_dir`` with
    ``cache_max_bytes`` > 0 turns on the local weight cache (``frame.engine.io.weight_cache``)."""

    timeout: float = 30.0
    give_up_seconds: float = 600.0
    backoff: float = 0.5
    max_backoff: float = 30.0
    retries: int | None = None
    token: str = field(default="", repr=False)
    token_origin: str = ""
    cache_dir: str = ""
    cache_max_bytes: int = 0
    clock: Any = field(default_factory=SystemClock, compare=False, repr=False)

    def headers_for(self, url: str) -> dict[str, str]:
        """``Authorization: Bearer`` for URLs of the token's origin, nothing for any other."""
        if self.token and self.token_origin and origin(url) == self.token_origin:
            return {"Authorization": f"Bearer {self.token}"}
        return {}

    @property
    def cache_enabled(self) -> bool:
        return bool(self.cache_dir) and self.cache_max_bytes > 0


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (credentials and path left out, default ports filled in)."""
    parts = urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    except ValueError:
        port = 0
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


_CURRENT: contextvars.ContextVar[HttpSettings | None] = contextvars.ContextVar("frame_http_settings", default=None)


def current() -> HttpSettings:
    """The settings made current by ``using``, else the defaults."""
    return _CURRENT.get() or HttpSettings()


@contextlib.contextmanager
def using(settings: HttpSettings | None) -> Iterator[None]:
    """Make ``settings`` current for the ``with`` block (``None``: leave the current ones)."""
    if settings is None:
        yield
        return
    token = _CURRENT.set(settings)
    try:
        yield
    finally:
        _CURRENT.reset(token)
