"""Weights providers (see ``base`` for the interface) and the name → provider table of ``load_model``.

Importing this package imports every provider module, whose ``@register_provider`` fills the table in
``registry`` (``make_provider`` reads it).
"""

from __future__ import annotations

from frame.engine.providers.base import ReadingProvider, WeightsProvider
from frame.engine.providers.http import HttpPrefetch
from frame.engine.providers.prefetch import NoCache, Prefetch
from frame.engine.providers.ram import Ram
from frame.engine.providers.registry import PROVIDERS, make_provider, provider_names

__all__ = ["PROVIDERS", "HttpPrefetch", "NoCache", "Prefetch", "Ram", "ReadingProvider", "WeightsProvider",
           "make_provider", "provider_names"]
