"""Weights providers (see ``base`` for the interface) and the name → provider table of ``load_model``."""

from __future__ import annotations

from frame.engine.providers.base import ReadingProvider, WeightsProvider
from frame.engine.providers.http import HttpPrefetch
from frame.engine.providers.prefetch import NoCache, Prefetch
from frame.engine.providers.ram import Ram
from frame.errors import UsageError

__all__ = ["NoCache", "Prefetch", "HttpPrefetch", "Ram", "ReadingProvider", "WeightsProvider",
           "make_provider", "PROVIDER_NAMES"]

PROVIDER_NAMES = ("nocache", "prefetch", "ram", "http")


def make_provider(weights: str | WeightsProvider, source_is_url: bool) -> WeightsProvider:
    """A provider for ``load_model(weights=...)``: a name from PROVIDER_NAMES or a provider object.

    Over a URL every named provider reads with HTTP Range requests; "prefetch" (the default) means
    the ``HttpPrefetch`` provider there, whose budget and retries suit a network.
    """
    if not isinstance(weights, str):
        missing = [m for m in ("prepare", "get", "release") if not callable(getattr(weights, m, None))]
        if missing:
            raise UsageError(f"weights provider {type(weights).__name__} lacks method(s): {', '.join(missing)}")
        return weights
    if weights == "http" or (weights == "prefetch" and source_is_url):
        if not source_is_url:
            raise UsageError("weights='http' needs an http(s) URL as the model source")
        return HttpPrefetch()
    table = {"nocache": NoCache, "prefetch": Prefetch, "ram": Ram}
    if weights not in table:
        raise UsageError(f"unknown weights provider {weights!r}; choose one of {', '.join(PROVIDER_NAMES)}")
    return table[weights]()
