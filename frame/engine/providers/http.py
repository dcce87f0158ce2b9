"""HTTP provider: prefetching reads over Range requests (see ``frame.engine.io.http.HttpSource``)."""

from __future__ import annotations

from frame.engine.io.http_settings import HttpSettings
from frame.engine.providers.prefetch import Prefetch
from frame.engine.providers.registry import register_provider


@register_provider("http", url_only=True)
class HttpPrefetch(Prefetch):
    """Prefetch over HTTP: keep-alive sessions, retries with backoff, nothing written to disk (unless the
    weight cache is on, see ``frame.engine.io.weight_cache``).

    The read-ahead budget is the disk provider's 32 MB: unconsumed read-ahead is resident memory, and on
    the full-size SD 1.5 UNet a 64 MB budget raised the peak from 245 to 312 MB over a fast link
    (benchmarks/http_streaming.py) while a Pi's Wi-Fi, slower than its compute, never fills even 32 MB.
    Keyword arguments (``retries``, ``backoff``, ``timeout``, ``give_up_seconds``, ``max_backoff``, ...)
    override single fields of ``http`` (``frame.engine.io.http_settings``; None: the defaults).
    """

    def __init__(self, budget_bytes: int = 32 << 20, big_weights_ahead: bool = False,
                 http: HttpSettings | None = None, **http_options) -> None:
        super().__init__(budget_bytes, http_options=http_options, big_weights_ahead=big_weights_ahead, http=http)
