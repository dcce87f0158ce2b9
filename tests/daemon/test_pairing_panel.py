"""The login page's "Show a code on the frame" on a real daemon (issue 40 item 3): the code goes to the
virtual panel through the info screen's worker, a second request within two minutes is refused,
typing the code logs the phone in, and the picture the code covered comes back."""

from __future__ import annotations

import re
import time

import requests
from PIL import Image

from frame.daemon.service import Daemon
from frame.web import create_blueprint
from tests.daemon.conftest import add_picture, clock, make_config
from tests.ports import free_port

PANEL = (160, 96)
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def _wait(predicate, timeout: float = 60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError("condition not reached")


def _csrf(session: requests.Session, url: str) -> str:
    return CSRF.search(session.get(url, timeout=10).text).group(1)


def test_a_code_on_the_panel_pairs_the_phone_and_the_picture_comes_back(tmp_path):
    port = free_port()
    config = make_config(tmp_path, web={"listen": f"127.0.0.1:{port}", "token": "test-token-123456"},
                         schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240),
                                   "show_at": clock(240)},
                         display={"size": f"{PANEL[0]}x{PANEL[1]}"})
    daemon = Daemon(config, pages=create_blueprint)
    (daemon.state_dir / "gallery").mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 40), (200, 30, 30)).save(daemon.state_dir / "gallery" / "p.png")
    picture = add_picture(daemon.store, "a red barn", file="p.png")
    daemon.store.record_shown(picture, "test")
    shown: list[str] = []
    show_code = daemon.show_pairing_code
    daemon.show_pairing_code = lambda code, minutes: (shown.append(code), show_code(code, minutes))[1]
    daemon.start()
    try:
        base = f"http://127.0.0.1:{port}"
        phone = requests.Session()
        asked = phone.post(base + "/pair/panel", data={"csrf_token": _csrf(phone, base + "/login")}, timeout=10)
        assert asked.status_code == 200 and "on its way to the frame" in asked.text  # back on the login page
        _wait(daemon.info_on_panel)
        with Image.open(daemon.status()["shown"]["output"]) as on_panel:
            assert on_panel.size == PANEL
        assert len(shown) == 1 and re.fullmatch(r"[2-9A-Z]{4}-[2-9A-Z]{4}", shown[0])

        again = phone.post(base + "/pair/panel", data={"csrf_token": _csrf(phone, base + "/login")}, timeout=10)
        assert "a new one can be asked for in" in again.text and len(shown) == 1  # one refresh per 2 minutes

        typed = phone.post(base + "/pair", data={"code": shown[0], "csrf_token": _csrf(phone, base + "/login")},
                           timeout=10, allow_redirects=False)
        assert typed.status_code == 303
        assert "Log out" in phone.get(base + "/", timeout=10).text
        _wait(lambda: not daemon.info_on_panel() and daemon.store.last_shown().reason == "after pairing")
        assert daemon.store.last_shown().picture_id == picture
    finally:
        daemon.stop()
