"""Fetching remote prompt feeds: explicit timeouts, a body size cap, conditional requests
(ETag / If-Modified-Since), retries with backoff, and the last good copy cached in the state directory
and used whenever a fetch or parse fails. A failing feed never raises out of ``refresh_feeds``.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests
import urllib3

from frame.config.schema import Config, FeedsConfig, FeedSource
from frame.daemon.feeds.parse import FeedFormatError, Sanitiser, combined_weight, parse_feed
from frame.daemon.store.database import Store, now_iso
from frame.net.deadline import Deadline, DeadlinePassed, DeadlineSession, RedirectRefused, next_location
from frame.redact import redact_text, redact_url
from frame.statefile import read_json, write_json

log = logging.getLogger(__name__)

USER_AGENT = "frame-eink/0.1 (+prompt feed reader)"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
ACCEPTED_TYPES = {
    "json": ("application/json", "text/json", "text/plain", "+json"),
    "text": ("text/plain",),
    "rss": ("application/rss+xml", "application/atom+xml", "application/xml", "text/xml", "+xml"),
}


class FeedFetchError(Exception):
    """The download failed in a way worth reporting in the feed health."""


@dataclass(frozen=True)
class FetchResult:
    body: bytes
    etag: str | None
    last_modified: str | None
    not_modified: bool = False


def feed_name(source: FeedSource) -> str:
    """The feed's ``name``, else its host[:port] (never the userinfo of its URL)."""
    return source.name or urlsplit(source.url).netloc.rpartition("@")[2]


def _type_ok(fmt: str, content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    if not media:
        return True
    return any(media.endswith(t) if t.startswith("+") else media == t for t in ACCEPTED_TYPES[fmt])


class FeedFetcher:
    """Downloads one feed at a time with the limits from ``config.feeds``: the whole fetch — every
    attempt, redirect, header and body byte — ends within ``feeds.timeout_seconds`` (``Deadline``)."""

    def __init__(self, feeds_config: FeedsConfig, cache_dir: Path, *, attempts: int = 3, backoff: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep, session: requests.Session | None = None) -> None:
        self.config = feeds_config
        self.cache_dir = Path(cache_dir)
        self.attempts = attempts
        self.backoff = backoff
        self.sleep = sleep
        self.session = session or DeadlineSession()

    def cache_file(self, url: str) -> Path:
        """Cache name from a hash of the URL: feed text or URLs never form a path."""
        return self.cache_dir / (hashlib.sha256(url.encode()).hexdigest()[:24] + ".json")

    def download(self, url: str, fmt: str, cached: dict | None) -> FetchResult:
        """One fetch: retries on connection problems, timeouts, 429 and 5xx while the deadline allows."""
        last_error = "no attempt made"
        with Deadline(self.config.timeout_seconds) as deadline:
            for attempt in range(self.attempts):
                if attempt:
                    pause = self.backoff * 2 ** (attempt - 1)
                    if pause >= deadline.remaining():
                        break  # no time left for another attempt: report the last failure
                    self.sleep(pause)
                try:
                    return self._get(url, fmt, cached, deadline)
                except DeadlinePassed as exc:
                    raise FeedFetchError(str(exc)) from None
                except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as exc:
                    if deadline.expired:  # our own timer cut the socket
                        raise FeedFetchError(deadline.message) from None
                    last_error = f"{type(exc).__name__}: {exc}"
                except _Retryable as exc:
                    last_error = str(exc)
                log.info("feed %s: attempt %d/%d failed: %s", redact_url(url), attempt + 1, self.attempts,
                         redact_text(last_error))
        raise FeedFetchError(last_error)

    def _get(self, url: str, fmt: str, cached: dict | None, deadline: Deadline) -> FetchResult:
        headers = {"User-Agent": USER_AGENT, "Accept": ", ".join(t for t in ACCEPTED_TYPES[fmt] if "/" in t)}
        if cached and cached.get("etag"):
            headers["If-None-Match"] = cached["etag"]
        if cached and cached.get("last_modified"):
            headers["If-Modified-Since"] = cached["last_modified"]
        hops = 0
        while True:
            deadline.check()
            timeout = max(0.05, min(self.config.timeout_seconds, deadline.remaining()))
            with self.session.get(url, headers=headers, timeout=(timeout, timeout), stream=True,
                                  allow_redirects=False) as response:
                try:
                    target = next_location(response, hops)
                except RedirectRefused as exc:
                    raise FeedFetchError(str(exc)) from None
                if target is None:
                    return self._answer(response, fmt, cached, deadline)
            url, hops = target, hops + 1

    def _answer(self, response: requests.Response, fmt: str, cached: dict | None, deadline: Deadline) -> FetchResult:
        if response.status_code == 304 and cached:
            return FetchResult(b"", cached.get("etag"), cached.get("last_modified"), not_modified=True)
        if response.status_code in RETRY_STATUS:
            raise _Retryable(f"HTTP {response.status_code}")
        if response.status_code != 200:
            raise FeedFetchError(f"HTTP {response.status_code}")
        content_type = response.headers.get("Content-Type", "")
        if not _type_ok(fmt, content_type):
            raise FeedFetchError(f"unexpected content type {content_type[:80]!r} for a {fmt} feed")
        body = self._read_capped(response, deadline)
        return FetchResult(body, response.headers.get("ETag"), response.headers.get("Last-Modified"))

    def _read_capped(self, response: requests.Response, deadline: Deadline) -> bytes:
        limit = self.config.max_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FeedFetchError(f"body of {int(declared)} bytes exceeds feeds.max_bytes={limit}")
        chunks, size = [], 0
        # read1 returns whatever one socket read delivered; a server dripping bytes is stopped by the
        # deadline's timer (it shuts the socket, ending the read) and by the check per chunk
        while chunk := response.raw.read1(16384, decode_content=True):
            size += len(chunk)
            if size > limit:
                raise FeedFetchError(f"body exceeds feeds.max_bytes={limit}")
            deadline.check()
            chunks.append(chunk)
        deadline.check()  # a body cut short by the timer is not a feed
        return b"".join(chunks)


class _Retryable(Exception):
    pass


def fetch_feed(fetcher: FeedFetcher, source: FeedSource,
               styles: tuple[str, ...]) -> tuple[list[dict], str | None, bool]:
    """Items of one feed, the error (or None) and whether they came from the cache."""
    sanitiser = Sanitiser(fetcher.config.max_prompt_chars, tuple(fetcher.config.blocklist))
    cache_path = fetcher.cache_file(source.url)
    cached = read_json(cache_path)

    def parse(body: bytes) -> list[dict]:
        return parse_feed(body, source.format, theme=source.theme, template=source.template,
                          styles=styles, sanitiser=sanitiser)

    try:
        result = fetcher.download(source.url, source.format, cached)
        if result.not_modified:
            return parse(base64.b64decode(cached["body"])), None, True
        items = parse(result.body)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(cache_path, {"url": redact_url(source.url), "etag": result.etag,
                                "last_modified": result.last_modified, "fetched_at": now_iso(),
                                "body": base64.b64encode(result.body).decode()})
        return items, None, False
    except (FeedFetchError, FeedFormatError, requests.RequestException, urllib3.exceptions.HTTPError,
            OSError) as exc:
        error = redact_text(f"{type(exc).__name__}: {exc}")[:300]
    if cached:
        try:
            return parse(base64.b64decode(cached["body"])), error, True
        except (FeedFormatError, ValueError, KeyError) as exc:
            log.error("feed %s: the cached copy is unusable too: %s", redact_url(source.url), exc)
    return [], error, False


def refresh_feeds(store: Store, config: Config, fetcher: FeedFetcher) -> dict[str, int]:
    """Fetch every configured feed into the store; return prompt counts per feed. Never raises for
    one feed's problems (they are logged and recorded in the feed health)."""
    counts: dict[str, int] = {}
    for source in config.feeds.sources:
        name = feed_name(source)
        started = time.monotonic()
        try:
            items, error, from_cache = fetch_feed(fetcher, source, tuple(config.taste.styles))
            for item in items:
                item["weight"] = combined_weight(item.get("weight", 1.0), source.weight)
            if items or error is None:
                store.replace_feed_items(name, items)
        except Exception as exc:  # a bug (or a store failure) must not stop the other feeds or the daemon
            log.exception("feed %s: unexpected failure", name)
            items, error, from_cache = [], f"{type(exc).__name__}: {exc}", False
        try:
            store.set_feed_health(name, redact_url(source.url), error is None, len(items),
                                  redact_text(error) if error else None, from_cache)
        except Exception:
            log.exception("feed %s: could not record its health", name)
        counts[name] = len(items)
        if error:
            log.warning("feed %s failed (%s); using %d cached prompts", name, redact_text(error), len(items))
        log.info("feed %s: %d prompts in %.2f s%s", name, len(items), time.monotonic() - started,
                 " (cached copy)" if from_cache else "")
    return counts
