"""Shared fixtures: a temp state dir, the daemon's real store seeded with pictures, and the real app."""

from __future__ import annotations

import functools
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from frame.config import Config, WebConfig
from frame.daemon.store.database import Store

TOKEN = "owner-token-for-tests-42"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def write_png(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (800, 480)) -> None:
    """A painting-like test picture: sky gradient towards ``colour``, a sun, and noisy water."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_png_bytes(colour, size))


@functools.lru_cache(maxsize=8)
def _png_bytes(colour: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    width, height = size
    rng = np.random.default_rng(sum(colour))
    t = np.linspace(0.0, 1.0, height)[:, None, None]
    top = np.array([30, 40, 90], dtype=float)
    sky = (1 - t) * top + t * np.array(colour, dtype=float)
    pixels = np.broadcast_to(sky, (height, width, 3)).copy()
    horizon = int(height * 0.62)
    water = pixels[horizon:] * 0.55 + rng.normal(0, 18, (height - horizon, width, 3))
    pixels[horizon:] = water
    yy, xx = np.mgrid[0:height, 0:width]
    sun = (xx - width * 0.68) ** 2 + (yy - horizon * 0.7) ** 2 < (height * 0.09) ** 2
    pixels[sun] = (255, 236, 190)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buffer, "PNG", compress_level=1)
    return buffer.getvalue()


def seed(store: Store, state_dir: Path) -> dict[str, int]:
    """Two pictures (the newer one shown, with an explanation plot) and a liked older one."""
    gallery = state_dir / "gallery"
    write_png(gallery / "old.png", (40, 90, 160))
    write_png(gallery / "new.png", (200, 120, 40))
    write_png(gallery / "new-panel.png", (200, 120, 40))
    write_png(gallery / "new-why.png", (250, 250, 250), (640, 400))
    old = store.add_picture(file="old.png", prompt="a mountain lake under stars, oil painting",
                            theme="a mountain lake under stars", style="oil painting", seed=7, steps=20)
    new = store.add_picture(
        file="new.png", panel_file="new-panel.png", prompt="a quiet harbour at dawn, watercolor painting",
        theme="a quiet harbour at dawn", style="watercolor painting", seed=1234, sampler="euler_a", steps=20,
        guidance=7.0, width=512, height=320, model="demo",
        why={"sentence": "Chosen because you liked 3 of the 4 most similar pictures (harbours, watercolor).",
             "plot": "new-why.png", "confidence": 0.75})
    store.rate(old, "thumb", 1)
    store.record_shown(new, "night")
    return {"old": old, "new": new}


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def store(state_dir: Path):
    store = Store.open(state_dir)
    yield store
    store.close()


@pytest.fixture
def pictures(store: Store, state_dir: Path) -> dict[str, int]:
    return seed(store, state_dir)


class FakeController:
    """Stands in for the running daemon: a live status with a render in progress, show/render calls."""

    def __init__(self) -> None:
        self.render: dict | None = None
        self.shown: list[int] = []
        self.renders = 0
        self.notice: str | None = None
        self.notice_details: str | None = None

    def status(self) -> dict:
        return {"state": "rendering" if self.render else "idle", "shown": None, "render": self.render,
                "notice": self.notice, "notice_details": self.notice_details,
                "next_runs": {"nightly_render": "2026-11-30T01:00:00+00:00"}}

    def render_now(self) -> dict:
        self.renders += 1
        return {"render_id": self.renders}

    def show(self, picture_id: int) -> dict:
        self.shown.append(picture_id)
        return {"picture_id": picture_id}


def make_app(store: Store, state_dir: Path, controller=None, config: Config | None = None):
    from frame.daemon.http.app import create_app
    from frame.web import create_blueprint

    config = config or Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN))
    app = create_app(config, store, token=TOKEN, controller=controller, state_dir=state_dir,
                     pages=create_blueprint)
    app.testing = True
    return app


@pytest.fixture
def controller() -> FakeController:
    return FakeController()


@pytest.fixture
def app(store, state_dir, pictures, controller):
    return make_app(store, state_dir, controller)


@pytest.fixture
def client(app):
    return app.test_client()


def csrf_from(html: str) -> str:
    match = CSRF.search(html)
    assert match, "no CSRF field in the page"
    return match.group(1)


def login(client, token: str = TOKEN):
    """Log in through the form like a browser; returns the response of the POST."""
    page = client.get("/login")
    return client.post("/login", data={"token": token, "csrf_token": csrf_from(page.get_data(as_text=True)),
                                       "next": "/"})


def logged_in(app):
    """A new test client of ``app``, logged in as the owner (every page needs the owner: issue 40)."""
    client = app.test_client()
    assert login(client).status_code == 303
    return client


@pytest.fixture
def owner(client):
    """A test client logged in as the owner."""
    response = login(client)
    assert response.status_code == 303
    return client


# The browser tests' fixtures (test_browser*.py); tests/web/browser.py imports playwright, so only they load it.
@pytest.fixture
def server(store, state_dir, pictures, controller):
    """The real WSGI app served by the daemon's server; yields its base URL."""
    from tests.web.browser import serve

    yield from serve(make_app(store, state_dir, controller))


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    """One phone-sized chromium with a fresh profile for each test module."""
    from tests.web.browser import phone_browser

    with phone_browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@pytest.fixture
def page(browser_context):
    browser_context.clear_cookies()
    page = browser_context.new_page()
    yield page
    page.close()
