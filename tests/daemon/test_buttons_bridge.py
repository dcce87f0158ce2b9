"""The buttons wired to a real daemon: gpiozero's MockFactory pins, the real show worker, the virtual panel."""

from __future__ import annotations

import logging
import time

import pytest
from PIL import Image

from frame.daemon.buttons_bridge import neighbour
from frame.daemon.jobs.info import INFO_REASON
from frame.daemon.service import Daemon
from tests.daemon.conftest import add_picture, clock, make_config
from tests.ports import free_port

PANEL = (160, 96)
LIKE, DISLIKE, NEXT, PREVIOUS = 5, 6, 16, 24
HOLD = 0.9  # seconds a held press lasts; buttons.hold_seconds is 0.5


def _wait(predicate, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise TimeoutError("condition not reached")


@pytest.fixture
def factory():
    mock = pytest.importorskip("gpiozero.pins.mock", reason="gpiozero not installed (optional extra 'buttons')")
    pins = mock.MockFactory()
    yield pins
    pins.reset()


def _config(tmp_path, **buttons):
    return make_config(
        tmp_path, web={"listen": f"127.0.0.1:{free_port()}", "token": "test-token-123456"},
        schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240), "show_at": clock(240)},
        display={"size": f"{PANEL[0]}x{PANEL[1]}"},
        buttons={"enabled": True, "bounce_ms": 10, "hold_seconds": 0.5, **buttons})


def _add(daemon: Daemon, colour: tuple[int, int, int], prompt: str) -> int:
    gallery = daemon.state_dir / "gallery"
    gallery.mkdir(exist_ok=True)
    name = f"p-{len(list(gallery.iterdir()))}.png"
    Image.new("RGB", (64, 40), colour).save(gallery / name)
    return add_picture(daemon.store, prompt, file=name, theme="sea", style="watercolour",
                       why={"sentence": f"chosen for the test ({prompt})"})


@pytest.fixture
def running(tmp_path, factory):
    """A started daemon with three pictures, the middle one on the panel."""
    daemon = Daemon(_config(tmp_path), pin_factory=factory)
    ids = [_add(daemon, colour, f"picture {n}")
           for n, colour in enumerate(((200, 30, 30), (30, 160, 40), (30, 40, 200)))]
    daemon.store.record_shown(ids[1], "test")
    daemon.start()
    yield daemon, ids, factory
    daemon.stop()


def _press(factory, pin: int, seconds: float = 0.04) -> None:
    factory.pin(pin).drive_low()  # active low
    time.sleep(seconds)
    factory.pin(pin).drive_high()
    time.sleep(0.03)


def _shown_count(daemon: Daemon) -> int:
    return daemon.store.query("SELECT COUNT(*) FROM shown")[0][0]


def test_like_and_dislike_rate_the_picture_on_the_panel(running):
    daemon, ids, factory = running
    _press(factory, LIKE)
    rating = _wait(lambda: daemon.store.picture(ids[1]).rating_kind)
    assert (rating, daemon.store.picture(ids[1]).rating_value) == ("thumb", 1)
    assert daemon.store.picture(ids[1]).favourite
    _press(factory, DISLIKE)
    _wait(lambda: daemon.store.picture(ids[1]).rating_value == -1)
    assert [daemon.store.picture(i).rating_kind for i in (ids[0], ids[2])] == [None, None]


def test_next_and_previous_show_the_gallery_neighbours(running):
    daemon, ids, factory = running
    _press(factory, NEXT)
    _wait(lambda: daemon.store.last_shown().picture_id == ids[2])
    assert daemon.store.last_shown().reason == "next button"
    assert daemon.status()["shown"]["output"].endswith("panel.png")
    _press(factory, PREVIOUS)
    _press(factory, PREVIOUS)  # two quick presses: two pictures back, at most one refresh each
    _wait(lambda: daemon.store.last_shown().picture_id == ids[0])
    assert daemon.store.last_shown().reason == "previous button"


def test_hold_shows_the_info_screen_and_holding_again_returns(running):
    daemon, ids, factory = running
    panel_png = daemon.state_dir / "display" / "panel.png"
    _press(factory, LIKE, seconds=HOLD)  # held: the info screen, not a like
    _wait(lambda: daemon.info_on_panel())
    with Image.open(panel_png) as info:
        assert info.size == PANEL
        info_pixels = info.convert("RGB").tobytes()
    assert daemon.store.picture(ids[1]).rating_kind is None
    shown = daemon.status()["shown"]
    assert (shown["picture_id"], shown["reason"]) == (ids[1], INFO_REASON) and shown["output"] == str(panel_png)
    _press(factory, LIKE)  # a like while the info screen is up rates the picture behind it
    _wait(lambda: daemon.store.picture(ids[1]).rating_value == 1)
    _press(factory, DISLIKE, seconds=HOLD)  # held again: back to the picture
    _wait(lambda: _shown_count(daemon) > 1)
    assert daemon.store.last_shown().picture_id == ids[1] and not daemon.info_on_panel()
    with Image.open(panel_png) as picture:
        assert picture.size == PANEL and picture.convert("RGB").tobytes() != info_pixels


def test_a_failing_action_is_logged_and_the_next_press_works(running, monkeypatch, caplog):
    daemon, ids, factory = running

    def broken(*args, **kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr("frame.daemon.buttons_bridge.rate_picture", broken)
    with caplog.at_level(logging.ERROR, logger="frame.buttons.dispatch"):
        _press(factory, LIKE)
        _wait(lambda: "button action like failed" in caplog.text)
    assert "database on fire" in caplog.text
    _press(factory, NEXT)
    _wait(lambda: daemon.store.last_shown().picture_id == ids[2])
    assert daemon.status()["state"] == "idle"


def test_buttons_are_released_when_the_daemon_stops(tmp_path, factory):
    from gpiozero import Button
    from gpiozero.exc import GPIOPinInUse

    daemon = Daemon(_config(tmp_path), pin_factory=factory)
    daemon.start()
    try:
        assert daemon.buttons is not None
        with pytest.raises(GPIOPinInUse):
            Button(LIKE, pin_factory=factory)
    finally:
        daemon.stop()
    assert daemon.buttons is None
    Button(LIKE, pin_factory=factory).close()  # free again
    _press(factory, NEXT)  # nothing runs against the closed store
    assert _shown_count_safe(tmp_path) == 0


def _shown_count_safe(state_dir) -> int:
    from frame.daemon.store.database import Store

    store = Store.open(state_dir)
    try:
        return store.query("SELECT COUNT(*) FROM shown")[0][0]
    finally:
        store.close()


def test_a_busy_pin_leaves_the_daemon_running_without_buttons(tmp_path, factory, caplog):
    from gpiozero import Button

    blocker = Button(NEXT, pin_factory=factory)
    daemon = Daemon(_config(tmp_path), pin_factory=factory)
    try:
        with caplog.at_level(logging.ERROR, logger="frame.daemon.buttons_bridge"):
            daemon.start()
        assert daemon.buttons is None and "GPIO16" in caplog.text
        assert daemon.status()["state"] == "idle"
    finally:
        daemon.stop()
        blocker.close()


def test_disabled_buttons_claim_no_pins(tmp_path, factory):
    daemon = Daemon(_config(tmp_path, enabled=False), pin_factory=factory)
    daemon.start()
    try:
        assert daemon.buttons is None
        assert factory.pins == {}
    finally:
        daemon.stop()


def test_neighbour_order_and_wrapping():
    ids = [3, 5, 9]
    assert [neighbour(ids, 5, +1), neighbour(ids, 5, -1)] == [9, 3]
    assert [neighbour(ids, 9, +1), neighbour(ids, 3, -1)] == [3, 9]  # wraps around
    assert [neighbour(ids, 4, +1), neighbour(ids, 4, -1)] == [5, 3]  # the base was deleted
    assert [neighbour(ids, None, +1), neighbour(ids, None, -1)] == [9, 9]
    assert neighbour([], 5, +1) is None


def test_the_web_settings_page_checks_the_file_the_daemon_was_started_with(tmp_path):
    """Start-up wiring next to the buttons': ``Daemon(config_path=...)`` reaches ``create_blueprint``."""
    import requests

    from frame.web import create_blueprint

    path = tmp_path / "frame.yaml"
    path.write_text("web:\n  listen: nowhere\n")
    daemon = Daemon(_config(tmp_path, enabled=False), config_path=path, pages=create_blueprint)
    daemon.start()
    try:
        page = requests.get(f"http://127.0.0.1:{daemon.server.port}/config", timeout=10,
                            headers={"Authorization": "Bearer test-token-123456"})  # the owner's (issue 40)
    finally:
        daemon.stop()
    assert page.status_code == 200
    assert str(path) in page.text and "web.listen" in page.text and "nowhere" in page.text
