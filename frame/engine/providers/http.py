"""HTTP provider: prefetching reads over Range requests (see ``frame.engine.http.HttpSource``)."""

from __future__ import annotations

from frame.engine.providers.disk import DiskPrefetch


class Http(DiskPrefetch):
    """Prefetch over HTTP: keep-alive sessions, retries with backoff, nothing written to disk.

    A larger default budget than on disk hides network latency; ``retries``, ``backoff`` (seconds,
    doubled per attempt) and ``timeout`` tune the retry policy.
    """

    def __init__(self, budget_bytes: int = 64 << 20, retries: int = 5, backoff: float = 0.5,
                 timeout: float = 60.0, big_weights_ahead: bool = False) -> None:
        super().__init__(budget_bytes, http_options={"retries": retries, "backoff": backoff, "timeout": timeout},
                         big_weights_ahead=big_weights_ahead)
