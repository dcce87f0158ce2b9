"""The weights-provider table: each provider class registers the name ``load_model(weights=...)`` takes.

``@register_provider("prefetch", url_variant="http")`` on the class fills ``PROVIDERS`` when its module
is imported (``frame.engine.providers`` imports them all). ``make_provider`` and the CLI's ``--weights``
choices read the table. Its names are ``ProviderName``, listed here because the engine never imports
the configuration; the schema's owner-facing ``WeightsName`` holds the same names
(``tests/test_registries.py`` checks the two agree): registering a name ``ProviderName`` does not list
fails at import. "http" is not an owner's name (it is what the others become over a URL), so it is
registered unlisted; "auto" is decided by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

from frame.engine.io.http_settings import HttpSettings
from frame.engine.providers.base import WeightsProvider
from frame.errors import UsageError
from frame.registry import Registry

P = TypeVar("P", bound=type)

# "auto" = prefetch from disk, the http provider for URLs (decided by the caller)
ProviderName = Literal["auto", "nocache", "prefetch", "ram"]
PROVIDERS: Registry[type] = Registry("weights provider", ProviderName,
                                     "frame.engine.providers.registry.ProviderName", stand_ins=("auto",))
# name → the provider used instead when the model source is an http(s) URL
URL_VARIANTS: dict[str, str] = {}
URL_ONLY: set[str] = set()


def register_provider(name: str, *, url_variant: str | None = None, url_only: bool = False
                      ) -> Callable[[P], P]:
    """Class decorator: ``name`` builds this provider (``cls()``). ``url_variant``: the provider that
    stands in for it over a URL; ``url_only``: the provider needs an http(s) source, so no owner
    names it (it is registered unlisted)."""
    PROVIDERS.claim(name, listed=not url_only)

    def decorate(cls: P) -> P:
        PROVIDERS.add(name, cls, listed=not url_only)
        if url_variant:
            URL_VARIANTS[name] = url_variant
        if url_only:
            URL_ONLY.add(name)
        return cls

    return decorate


def provider_names() -> tuple[str, ...]:
    """Every name ``load_model(weights=...)`` takes: ``ProviderName``'s, in its order, then "http"."""
    return PROVIDERS.names()


def make_provider(weights: str | WeightsProvider, source_is_url: bool,
                  http: HttpSettings | None = None) -> WeightsProvider:
    """A provider for ``load_model(weights=...)``: a registered name or a provider object; a named one
    reads URLs with ``http`` (``frame.engine.io.http_settings``; None: the defaults).

    Over a URL a name with a URL variant builds that variant instead ("prefetch", the default, means
    the ``HttpPrefetch`` provider there, whose budget and retries suit a network).
    """
    if not isinstance(weights, str):
        missing = [m for m in ("prepare", "get", "release") if not callable(getattr(weights, m, None))]
        if missing:
            raise UsageError(f"weights provider {type(weights).__name__} lacks method(s): {', '.join(missing)}")
        return weights
    PROVIDERS.lookup(weights)  # an unknown name raises with a suggestion and the list
    if weights in URL_ONLY and not source_is_url:
        raise UsageError(f"weights={weights!r} needs an http(s) URL as the model source")
    if source_is_url:
        weights = URL_VARIANTS.get(weights, weights)
    return PROVIDERS[weights](http=http)
