"""Pairing a phone instead of typing the owner token (issue 40 item 3): ``frame token --pair``'s link and
short code, single use, expiry, the rate limits, the session it opens, and "log out everywhere",
which asks first. The end-to-end tests run the daemon's real app on a real server on 127.0.0.1."""

from __future__ import annotations

import re
import stat

import pytest
import requests

from frame.config import Config, WebConfig
from frame.web import pairing
from frame.web.pairing import PairingCodes
from tests.web.conftest import TOKEN, csrf_from, login, make_app

LINK = re.compile(r"(http://127\.0\.0\.1:\d+/pair/[A-Za-z0-9_-]+)")
CODE = re.compile(r"login page: ([2-9A-Z]{4}-[2-9A-Z]{4})")


@pytest.fixture
def served(store, state_dir, pictures, controller):
    """The daemon's app on the daemon's server; yields (base URL, app, the config that names its port)."""
    from frame.net.server import HttpServer

    app = make_app(store, state_dir, controller)
    server = HttpServer(app, "127.0.0.1:0")
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        config = Config(state_dir=str(state_dir), web=WebConfig(listen=f"127.0.0.1:{server.port}", token=TOKEN))
        yield base, app, config
    finally:
        server.close()


def _csrf(session: requests.Session, url: str) -> str:
    return csrf_from(session.get(url, timeout=10).text)


def _logged_in(session: requests.Session, base: str) -> bool:
    answer = session.get(base + "/", timeout=10, allow_redirects=False)
    return answer.status_code == 200 and "Log out" in answer.text


def test_frame_token_pair_link_pairs_one_phone_once(served, capsys):
    from frame.cli.pair import pairing_lines

    base, _, config = served
    text = "\n".join(pairing_lines(config, with_qr=False))
    link, code = LINK.search(text).group(1), CODE.search(text).group(1)
    assert link.startswith(base + "/pair/") and "10 minutes" in text

    phone = requests.Session()
    page = phone.get(link, timeout=10)  # a link preview's GET must not use it up: a page with a button
    assert page.status_code == 200 and "Pair this phone" in page.text and not _logged_in(phone, base)
    answer = phone.post(link, data={"csrf_token": csrf_from(page.text)}, timeout=10, allow_redirects=False)
    assert answer.status_code == 303 and answer.headers["Location"] == "/"
    cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Expires=" in cookie  # long-lived, not Strict
    home = phone.get(base + "/", timeout=10, allow_redirects=False)
    assert home.status_code == 200 and "Log out" in home.text and "This phone is paired" in home.text

    thief = requests.Session()  # the same link again, or its code: used up together
    again = thief.post(link, data={"csrf_token": _csrf(thief, link)}, timeout=10, allow_redirects=False)
    assert again.status_code == 401 and "wrong, used or expired" in again.text
    typed = thief.post(base + "/pair", data={"code": code, "csrf_token": _csrf(thief, base + "/login")},
                       timeout=10, allow_redirects=False)
    assert typed.status_code == 401 and not _logged_in(thief, base)


def test_the_short_code_typed_on_the_login_page(served):
    base, app, _ = served
    made = app.extensions["frame.web"].pairing_codes().create("test")
    phone = requests.Session()
    csrf = _csrf(phone, base + "/login")
    typed = made.shown_code().lower().replace("-", " - ")  # as a person types it
    answer = phone.post(base + "/pair", data={"code": typed, "csrf_token": csrf, "next": "/gallery"},
                        timeout=10, allow_redirects=False)
    assert answer.status_code == 303 and answer.headers["Location"] == "/gallery"
    assert _logged_in(phone, base)
    other = requests.Session()
    again = other.post(base + "/pair", data={"code": made.code, "csrf_token": _csrf(other, base + "/login")},
                       timeout=10)
    assert again.status_code == 401 and not _logged_in(other, base)


def test_a_code_expires_after_ten_minutes(served):
    base, app, _ = served
    now = [1_000_000.0]
    ctx = app.extensions["frame.web"]
    ctx.pairings = PairingCodes(ctx.state_dir, clock=lambda: now[0])
    made = ctx.pairings.create("test")
    now[0] += pairing.LIFETIME_SECONDS + 1
    phone = requests.Session()
    answer = phone.post(base + "/pair", data={"code": made.code, "csrf_token": _csrf(phone, base + "/login")},
                        timeout=10)
    assert answer.status_code == 401 and not _logged_in(phone, base)
    assert ctx.pairings.pending() == 0  # an expired pairing is dropped from the file


def test_wrong_codes_are_limited_per_address_and_for_everyone(app, client):
    ctx = app.extensions["frame.web"]
    made = ctx.pairing_codes().create("test")
    csrf = csrf_from(client.get("/login").get_data(as_text=True))
    for _ in range(10):
        assert client.post("/pair", data={"code": "ZZZZ-ZZZZ", "csrf_token": csrf}).status_code == 401
    blocked = client.post("/pair", data={"code": made.code, "csrf_token": csrf})
    assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) > 0  # even the right code waits
    assert ctx.pairing_codes().pending() == 1  # and is not used up

    # from 20 more addresses, 1 wrong code each: 30 in all lock pairing for every address for a while
    for n in range(20):
        other = app.test_client()
        other.environ_base["REMOTE_ADDR"] = f"10.0.0.{n + 1}"
        token = csrf_from(other.get("/login").get_data(as_text=True))
        assert other.post("/pair", data={"code": "YYYY-YYYY", "csrf_token": token}).status_code == 401
    fresh = app.test_client()
    fresh.environ_base["REMOTE_ADDR"] = "10.0.1.1"
    token = csrf_from(fresh.get("/login").get_data(as_text=True))
    assert fresh.post("/pair", data={"code": made.code, "csrf_token": token}).status_code == 429
    assert login(fresh).status_code == 303  # the owner token still logs in


def test_guessing_a_code_within_its_life_is_infeasible():
    tries = pairing.GLOBAL_FAILURES * pairing.LIFETIME_SECONDS / pairing.GLOBAL_WINDOW
    assert tries / len(pairing.ALPHABET) ** pairing.CODE_LENGTH < 1e-9


def test_the_file_holds_digests_only_and_is_private(state_dir):
    codes = PairingCodes(state_dir)
    made = codes.create("test")
    stored = (state_dir / pairing.PAIRING_FILE).read_text()
    assert made.code not in stored and made.secret not in stored
    assert stat.S_IMODE((state_dir / pairing.PAIRING_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / pairing.LOCK_FILE).stat().st_mode) == 0o600
    assert codes.redeem_code(made.shown_code()) == "test" and codes.redeem_code(made.code) is None


@pytest.mark.parametrize("content", [b"x" * (pairing.MAX_FILE_BYTES + 1), b'{"sha256": "0", "data": []}',
                                     b"[1, 2, 3]"])
def test_a_damaged_or_huge_file_holds_no_pairing(state_dir, content):
    (state_dir / pairing.PAIRING_FILE).write_bytes(content)
    codes = PairingCodes(state_dir)
    assert codes.pending() == 0 and codes.redeem_code("ABCD-EFGH") is None
    made = codes.create("test")  # and pairing works again
    assert codes.redeem_code(made.code) == "test"


def test_at_most_a_few_pairings_wait(state_dir):
    codes = PairingCodes(state_dir)
    made = [codes.create("test") for _ in range(pairing.MAX_PENDING + 3)]
    assert codes.pending() == pairing.MAX_PENDING
    assert codes.redeem_code(made[0].code) is None and codes.redeem_code(made[-1].code) == "test"


def test_the_qr_code_is_the_link(state_dir):
    segno = pytest.importorskip("segno")
    from frame.cli.pair import qr_text

    text = qr_text("http://192.168.1.20:8080/pair/abc")
    expected = segno.make("http://192.168.1.20:8080/pair/abc", error="m")
    rows = text.rstrip("\n").split("\n")
    assert len(rows) == (expected.symbol_size()[1] + 1) // 2  # two modules a line (half blocks)


def test_log_out_everywhere_asks_first(app, store):
    phone, laptop = app.test_client(), app.test_client()
    login(phone)
    login(laptop)
    csrf = csrf_from(laptop.get("/config").get_data(as_text=True))
    unconfirmed = laptop.post("/logout-everywhere", data={"csrf_token": csrf})  # a form without the confirm step
    page = unconfirmed.get_data(as_text=True)
    assert unconfirmed.status_code == 200 and "2 sessions" in page and 'name="confirm"' in page
    assert phone.get("/").status_code == 200 and laptop.get("/").status_code == 200  # nobody logged out
    confirm = laptop.get("/logout-everywhere")
    assert confirm.status_code == 200 and "Log out everywhere?" in confirm.get_data(as_text=True)
    done = laptop.post("/logout-everywhere", data={"csrf_token": csrf, "confirm": "yes"}, follow_redirects=True)
    assert "Logged out everywhere: 2 sessions ended." in done.get_data(as_text=True)
    assert phone.get("/").status_code == 303 and laptop.get("/").status_code == 303
