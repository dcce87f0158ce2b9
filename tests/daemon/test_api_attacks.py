"""The JSON API under attack from the LAN: token guessing, absurd ids, hostile JSON, a full disk.
Every answer is a 4xx/5xx with a JSON ``error`` body, never an unhandled 500."""

from __future__ import annotations

import pytest

from frame.daemon.http.app import create_app
from frame.net.ratelimit import FailureLimiter
from frame.web import create_blueprint
from tests.daemon.conftest import add_picture
from tests.web.conftest import csrf_from

TOKEN = "owner-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def now():
    return [1000.0]


@pytest.fixture
def app(config, store, tmp_path, now):
    return create_app(config, store, token=TOKEN, state_dir=tmp_path, pages=create_blueprint,
                      limiter=FailureLimiter(clock=lambda: now[0]))


@pytest.fixture
def client(app):
    return app.test_client()


def test_bearer_token_guessing_is_rate_limited(client, store, now):
    codes = [client.post("/api/prompts", json={"prompt": "x"},
                         headers={"Authorization": f"Bearer guess-{i:06d}-abcdef"}).status_code for i in range(300)]
    assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}
    locked = client.post("/api/prompts", json={"prompt": "a fox"}, headers=AUTH)  # even the right token
    assert locked.status_code == 429 and "too many" in locked.get_json()["error"]
    assert 0 < int(locked.headers["Retry-After"]) <= 300
    elsewhere = client.post("/api/prompts", json={"prompt": "a fox"}, headers=AUTH,
                            environ_base={"REMOTE_ADDR": "192.168.1.20"})
    assert elsewhere.status_code == 201  # the owner's phone on another address is not locked out
    now[0] += 301
    assert client.post("/api/prompts", json={"prompt": "a hare"}, headers=AUTH).status_code == 201
    assert [p.prompt for p in store.queued_prompts()] == ["a fox", "a hare"]


def test_login_form_and_bearer_header_share_one_count(client, now):
    for i in range(10):
        client.post("/api/render", headers={"Authorization": f"Bearer guess-{i:06d}-abcdef"})
    csrf = csrf_from(client.get("/login").get_data(as_text=True))
    page = client.post("/login", data={"token": TOKEN, "csrf_token": csrf})
    assert page.status_code == 429 and "Retry-After" in page.headers


HUGE = 2 ** 63  # one past SQLite's INTEGER range


@pytest.mark.parametrize("method, path", [
    ("GET", f"/api/pictures/{HUGE}"), ("GET", f"/api/pictures/{HUGE}/image"),
    ("POST", f"/api/pictures/{HUGE}/rating"), ("POST", f"/api/show/{HUGE}"),
    ("GET", f"/api/pictures/{10 ** 30}"), ("DELETE", f"/api/pictures/{HUGE}"),
    ("GET", "/api/pictures/\u0661"), ("DELETE", "/api/pictures/\uff10\uff11"),
])
def test_ids_beyond_sqlite_range_are_404_json(client, store, method, path):
    add_picture(store)
    response = client.open(path, method=method, json={"rating": 1}, headers=AUTH)
    assert response.status_code == 404 and "error" in response.get_json()


@pytest.mark.parametrize("query", [f"offset={HUGE}", f"limit={HUGE}", f"offset={10 ** 40}&limit=5"])
def test_offsets_beyond_sqlite_range_are_400_json(client, query):
    response = client.get(f"/api/pictures?{query}", headers=AUTH)
    assert response.status_code == 400 and "offset" in response.get_json()["error"]


@pytest.mark.parametrize("path", [f"/pictures/{HUGE}", f"/pictures/{HUGE}/image", f"/pictures/{HUGE}/thumb",
                                  "/pictures/\u0661", "/pictures/\uff10\uff11", "/pictures/\u0661/image",
                                  "/pictures/\U0001d7e3"])
def test_web_pages_with_huge_or_non_ascii_ids_are_404(client, store, path):
    """Unicode digits (Arabic-Indic ١, fullwidth ０１, mathematical 𝟣) showed picture 1: ASCII only."""
    add_picture(store)
    assert client.get(path).status_code == 404


@pytest.mark.parametrize("body", ["[" * 60_000, '{"prompt": ' + "[" * 60_000, '{"a":' * 12_000])
def test_deeply_nested_json_is_400(client, store, body):
    response = client.post("/api/prompts", data=body, content_type="application/json", headers=AUTH)
    assert response.status_code == 400 and "JSON" in response.get_json()["error"]
    assert store.queued_prompts() == []


def _fill_the_disk(store) -> None:
    """SQLite's own 'database or disk is full' (SQLITE_FULL), as on a full SD card: the database may
    not grow by a single page."""
    pages = store.query("PRAGMA page_count")[0][0]
    store.query(f"PRAGMA max_page_count = {pages}")


def test_posts_on_a_full_disk_are_507_and_store_nothing(client, store):
    picture = add_picture(store)
    _fill_the_disk(store)
    for _ in range(40):  # each takes a bit more room until a page is needed
        queued = client.post("/api/prompts", json={"prompt": "a lighthouse " * 20}, headers=AUTH)
        if queued.status_code != 201:
            break
    assert queued.status_code == 507 and "full" in queued.get_json()["error"]
    count = len(store.queued_prompts())
    for _ in range(500):  # ratings are small rows: fill their last page
        rated = client.post(f"/api/pictures/{picture}/rating", json={"stars": 5}, headers=AUTH)
        if rated.status_code != 200:
            break
    assert rated.status_code == 507 and "full" in rated.get_json()["error"]
    assert client.get("/api/status", headers=AUTH).status_code == 200  # reads still work
    assert len(store.queued_prompts()) == count


def test_web_forms_on_a_full_disk_say_so(client, store):
    from tests.web.conftest import login

    picture = add_picture(store)
    login(client, TOKEN)
    _fill_the_disk(store)
    page = client.get("/queue").get_data(as_text=True)
    for _ in range(40):
        response = client.post("/queue", data={"prompt": "a lighthouse " * 10, "csrf_token": csrf_from(page)})
        if response.status_code != 303:
            break
    assert response.status_code == 507 and "full" in response.get_data(as_text=True)
    assert client.get(f"/pictures/{picture}").status_code == 200


def test_the_id_pattern_takes_exactly_the_ascii_numbers_in_range():
    import re

    from frame.daemon.http.contract import SQLITE_MAX_INT, digits_at_most

    small = re.compile(digits_at_most(1203))
    assert [n for n in range(3000) if small.fullmatch(str(n))] == list(range(1204))
    big = re.compile(digits_at_most(SQLITE_MAX_INT))
    for n in (SQLITE_MAX_INT - 10, SQLITE_MAX_INT, SQLITE_MAX_INT + 1, SQLITE_MAX_INT + 10 ** 17, 10 ** 19):
        assert bool(big.fullmatch(str(n))) == (n <= SQLITE_MAX_INT), n
    assert not big.fullmatch("\u0661") and not big.fullmatch("\uff11")
