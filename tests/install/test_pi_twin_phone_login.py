"""The Pi twin's phone against the daemon's real app on 127.0.0.1, on x86 in a second.

The twin waits for the daemon before it can read the owner token from the state folder. It used to wait
by asking /api/status with no token; since every read needs the owner (issue 40 item 2) those asks count
as wrong tokens, the limiter locked 127.0.0.1 out and the twin's night failed after 300 s. Here the
phone waits, reads the token, logs in and reads the status, as the twin does."""

from __future__ import annotations

import pytest

from frame.daemon.http.app import create_app
from frame.daemon.store.database import Store
from frame.net.server import HttpServer
from frame.web import create_blueprint
from tests.daemon.conftest import make_config
from tests.install.pitools import load_tool

phone_mod = load_tool("pi_twin_phone")
TOKEN = "pi-twin-phone-token-0123456789ab"


@pytest.fixture
def daemon_port(tmp_path):
    store = Store.open(tmp_path / "state")
    http = HttpServer(create_app(make_config(tmp_path), store, token=TOKEN, pages=create_blueprint), "127.0.0.1:0")
    http.start()
    yield http.port
    http.close()
    store.close()


def test_waiting_for_the_daemon_spends_no_wrong_tokens(daemon_port):
    phone = phone_mod.Phone(f"http://127.0.0.1:{daemon_port}", "", timeout=5)
    for _ in range(15):  # more waits than the limiter forgives wrong tokens
        phone.wait_up(5)
    phone.token = TOKEN  # the twin reads it from the state folder now
    assert "state" in phone.status()
    phone.login()


def test_waiting_gives_up_with_the_reason_when_nothing_answers():
    phone = phone_mod.Phone("http://127.0.0.1:9", "", timeout=1)
    with pytest.raises(phone_mod.PhoneError, match="did not answer within 1 s"):
        phone.wait_up(1)
