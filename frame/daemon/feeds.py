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
from typing import Any
from urllib.parse import urlsplit

import requests

from frame.daemon.feedparse import FeedFormatError, Sanitiser, parse_feed
from frame.daemon.statefile import read_json, write_json
from frame.daemon.store import Store, now_iso

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


def feed_name(source: Any) -> str:
    return source.name or urlsplit(source.url).netloc


def _type_ok(fmt: str, content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    if not media:
        return True
    return any(media.endswith(t) if t.startswith("+") else media == t for t in ACCEPTED_TYPES[fmt])


class FeedFetcher:
    """Downloads one feed at a time with the limits from ``config.feeds``."""

    def __init__(self, feeds_config: Any, cache_dir: Path, *, attempts: int = 3, backoff: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep, session: requests.Session | None = None) -> None:
        self.config = feeds_config
        self.cache_dir = Path(cache_dir)
        self.attempts = attempts
        self.backoff = backoff
        self.sleep = sleep
        self.session = session or requests.Session()

    def cache_file(self, url: str) -> Path:
        """Cache name from a hash of the URL: feed text or URLs never form a path."""
        return self.cache_dir / (hashlib.sha256(url.encode()).hexdigest()[:24] + ".json")

    def download(self, url: str, fmt: str, cached: dict | None) -> FetchResult:
        """One GET with retries on connection problems, timeouts, 429 and 5xx."""
        last_error = "no attempt made"
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return self._get(url, fmt, cached)
            except (requests.ConnectionError, requests.Timeout) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            except _Retryable as exc:
                last_error = str(exc)
            log.info("feed %s: attempt %d/%d failed: %s", url, attempt + 1, self.attempts, last_error)
        raise FeedFetchError(last_error)

    def _get(self, url: str, fmt: str, cached: dict | None) -> FetchResult:
        headers = {"User-Agent": USER_AGENT, "Accept": ", ".join(t for t in ACCEPTED_TYPES[fmt] if "/" in t)}
        if cached and cached.get("etag"):
            headers["If-None-Match"] = cached["etag"]
        if cached and cached.get("last_modified"):
            headers["If-Modified-Since"] = cached["last_modified"]
        timeout = self.config.timeout_seconds
        started = time.monotonic()
        with self.session.get(url, headers=headers, timeout=(timeout, timeout), stream=True,
                              allow_redirects=True) as response:
            if response.status_code == 304 and cached:
                return FetchResult(b"", cached.get("etag"), cached.get("last_modified"), not_modified=True)
            if response.status_code in RETRY_STATUS:
                raise _Retryable(f"HTTP {response.status_code}")
            if response.status_code != 200:
                raise FeedFetchError(f"HTTP {response.status_code}")
            content_type = response.headers.get("Content-Type", "")
            if not _type_ok(fmt, content_type):
                raise FeedFetchError(f"unexpected content type {content_type[:80]!r} for a {fmt} feed")
            body = self._read_capped(response, started, timeout)
            return FetchResult(body, response.headers.get("ETag"), response.headers.get("Last-Modified"))

    def _read_capped(self, response: requests.Response, started: float, timeout: float) -> bytes:
        limit = self.config.max_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FeedFetchError(f"body of {int(declared)} bytes exceeds feeds.max_bytes={limit}")
        chunks, size = [], 0
        # read1 returns whatever one socket read delivered, so a server dripping bytes slower than the
        # read timeout cannot keep us inside one call: the total-time check below runs per chunk.
        while chunk := response.raw.read1(16384, decode_content=True):
            size += len(chunk)
            if size > limit:
                raise FeedFetchError(f"body exceeds feeds.max_bytes={limit}")
            if time.monotonic() - started > 2 * timeout:
                raise FeedFetchError(f"download took longer than {2 * timeout:.0f} s (slow server)")
            chunks.append(chunk)
        return b"".join(chunks)


class _Retryable(Exception):
    pass


def fetch_feed(fetcher: FeedFetcher, source: Any, styles: tuple[str, ...]) -> tuple[list[dict], str | None, bool]:
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
        write_json(cache_path, {"url": source.url, "etag": result.etag, "last_modified": result.last_modified,
                                "fetched_at": now_iso(), "body": base64.b64encode(result.body).decode()})
        return items, None, False
    except (FeedFetchError, FeedFormatError, requests.RequestException, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
    if cached:
        try:
            return parse(base64.b64decode(cached["body"])), error, True
        except (FeedFormatError, ValueError, KeyError) as exc:
            log.error("feed %s: the cached copy is unusable too: %s", source.url, exc)
    return [], error, False


def refresh_feeds(store: Store, config: Any, fetcher: FeedFetcher) -> dict[str, int]:
    """Fetch every configured feed into the store; return prompt counts per feed. Never raises for
    one feed's problems (they are logged and recorded in the feed health)."""
    counts: dict[str, int] = {}
    for source in config.feeds.sources:
        name = feed_name(source)
        started = time.monotonic()
        try:
            items, error, from_cache = fetch_feed(fetcher, source, tuple(config.taste.styles))
        except Exception as exc:  # a bug in parsing must not stop the other feeds or the daemon
            log.exception("feed %s: unexpected failure", name)
            items, error, from_cache = [], f"{type(exc).__name__}: {exc}", False
        for item in items:
            item["weight"] = item.get("weight", 1.0) * source.weight
        if items or error is None:
            store.replace_feed_items(name, items)
        store.set_feed_health(name, source.url, error is None, len(items), error, from_cache)
        counts[name] = len(items)
        if error:
            log.warning("feed %s failed (%s); using %d cached prompts", name, error, len(items))
        log.info("feed %s: %d prompts in %.2f s%s", name, len(items), time.monotonic() - started,
                 " (cached copy)" if from_cache else "")
    return counts
