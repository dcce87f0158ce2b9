"""How model URLs are fetched: timeouts, how long to keep retrying, the bearer token, the weight cache.

One ``HttpSettings`` value describes it: plain typed fields, never the configuration (which
``frame.diffusion.configured.http_settings_for`` turns into this value, above the engine). It travels
one way only, as an explicit ``http`` argument: the pipeline passes it to ``ModelFiles`` and its loader,
``load_model`` to the structure scan and the weights provider, each of those to the ``SourcePool`` it
opens; the VAE shape probe, the encoder identity and the estimate's counting and read probe take it the
same way. There is no context variable (``tests/engine/test_http_settings_explicit.py`` keeps it so): a
value that arrives as an argument is the same on the prefetch thread and in the caller.

Retries are bounded by time, not by count: a NAS that sleeps for a minute at the start of the night,
or Wi-Fi that drops for half a minute mid-step, costs waiting, not the night. ``give_up_seconds`` of
failures in a row end the render with a clear error (the daemon then restarts the worker, which
resumes from the last finished step).

The token is sent only to the origin (scheme, host, port) of the configured model URL, never to
another host a URL might point at.
"""

from __future__ import annotations

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
