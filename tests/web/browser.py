"""Driving the phone pages in a real headless browser: Debian's chromium through Playwright (no downloads).

Shared by the browser tests (``test_browser*.py``): importing this module skips the importing test
module when playwright or chromium is missing, unless CI's ``REQUIRE_BROWSER_TEST=1`` makes that a
failure. The chromium and server fixtures built on it are in ``tests/web/conftest.py``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.web.conftest import TOKEN

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "web"
INSTALL = "apt-get install -y chromium && pip install playwright (never 'playwright install')"

# CI sets REQUIRE_BROWSER_TEST=1 so a missing browser fails the run instead of silently skipping it.
if os.environ.get("REQUIRE_BROWSER_TEST") == "1":
    from playwright import sync_api
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: {INSTALL}"
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason=f"playwright is not installed: {INSTALL}")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: {INSTALL}", allow_module_level=True)

# How long an expect() waits for the page (Playwright's default: 5 s). CI runs 2 pytest workers on its
# 2 cores beside chromium, show workers and daemons: there the lazy "why" plot of the Now page once
# took over 5 s to load (a 0x0, so "hidden", <img> until then) and the test failed. An expectation
# polls, so the longer bound costs nothing while the page is quick.
EXPECT_TIMEOUT_MS = 15_000
sync_api.expect.set_options(timeout=EXPECT_TIMEOUT_MS)


SHOW_TIMEOUT_MS = 60_000  # a real show worker runs before "Show this on the frame" answers


def serve(app) -> Iterator[str]:
    """The daemon's own server (waitress with its body caps) on an ephemeral port; yields its base URL."""
    from frame.net.server import HttpServer

    httpd = HttpServer(app, "127.0.0.1:0")
    httpd.start()
    try:
        yield f"http://127.0.0.1:{httpd.port}"
    finally:
        httpd.close()


@contextmanager
def phone_browser(profile: Path) -> Iterator:
    """A phone-sized chromium with a fresh profile in ``profile`` (launching costs ~2 s)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=ARGS, headless=True,
            viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True)
        # 30 s: a form submit on a loaded 2-core CI machine (two test workers beside chromium) once took over 10
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def log_in(page, server: str, path: str = "/") -> None:
    page.goto(server + "/login?next=" + path)
    page.get_by_label("Owner token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    sync_api.expect(page.get_by_role("button", name="Log out", exact=True)).to_be_visible()


def no_horizontal_overflow(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide in a 390 px viewport"
