"""HTTP provider: prefetching reads over Range requests (see ``frame.engine.http.HttpSource``)."""

from __future__ import annotations

from frame.engine.providers.disk import DiskPrefetch


class Http(DiskPrefetch):
    """Prefetch over HTTP: keep-alive sessions, retries with backoff, nothing written to disk (unless the
    weight cache is on, see ``frame.engine.weight_cache``).

    A larger default budget than on disk hides network latency. Keyword arguments (``retries``,
    ``backoff``, ``timeout``, ``give_up_seconds``, ``max_backoff``, ...) override single fields of the
    current ``HttpSettings`` (``frame.engine.http_settings``).
    """

    def __init__(self, budget_bytes: int = 64 << 20, big_weights_ahead: bool = False, **http_options) -> None:
        super().__init__(budget_bytes, http_options=http_options, big_weights_ahead=big_weights_ahead)
