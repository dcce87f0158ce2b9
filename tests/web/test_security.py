"""Every security rule of the phone page has a test here: login, session cookie, CSRF, origin, input
validation, path handling, rate limiting and the closed list of routes (who may read them without
the owner: ``test_access.py``)."""

from __future__ import annotations

import stat

import pytest

from frame.web.auth import LoginLimiter
from tests.web.conftest import TOKEN, csrf_from, login, make_app


def html(response) -> str:
    return response.get_data(as_text=True)


def ratings(store) -> list:
    return [tuple(r) for r in store.query("SELECT picture_id, kind, value FROM ratings ORDER BY id")]


def test_changes_without_login_are_refused(client, store, pictures):
    before = ratings(store)
    csrf = csrf_from(html(client.get("/login")))
    for path, data in ((f"/pictures/{pictures['new']}/rate", {"rating": "like"}),
                       ("/queue", {"prompt": "sneaky"}), (f"/pictures/{pictures['new']}/show", {}),
                       ("/render", {})):
        response = client.post(path, data={**data, "csrf_token": csrf})
        assert response.status_code == 401, path
        assert "Log in with the owner token" in html(response)
    assert ratings(store) == before and store.queued_prompts() == []


def test_wrong_token_is_refused_and_right_one_logs_in(client):
    assert login(client, "not-the-owner-token").status_code == 401
    assert "Log out" not in html(client.get("/"))
    response = login(client)
    assert response.status_code == 303 and response.headers["Location"] == "/"
    assert "Log out" in html(client.get("/"))


def test_session_cookie_flags(client):
    response = login(client)
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("frame_session=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert TOKEN not in cookie


def test_session_cookie_is_secure_over_https(app):
    client = app.test_client()  # an address: a host name would have to be one of the frame's (net/hosts.py)
    page = client.get("/login", base_url="https://127.0.0.1")
    response = client.post("/login", base_url="https://127.0.0.1",
                           data={"token": TOKEN, "csrf_token": csrf_from(html(page))})
    assert response.status_code == 303 and "Secure" in response.headers["Set-Cookie"]


@pytest.mark.parametrize(("csrf", "status"), [(None, 400), ("", 400), ("forged-token-value", 403)])
def test_missing_or_wrong_csrf_token(owner, store, pictures, csrf, status):
    before = ratings(store)
    data = {"rating": "like"} if csrf is None else {"rating": "like", "csrf_token": csrf}
    assert owner.post(f"/pictures/{pictures['new']}/rate", data=data).status_code == status
    queue = {"prompt": "x"} if csrf is None else {"prompt": "x", "csrf_token": csrf}
    assert owner.post("/queue", data=queue).status_code == status
    assert ratings(store) == before and store.queued_prompts() == []


def test_login_form_needs_csrf_too(client):
    client.get("/login")
    assert client.post("/login", data={"token": TOKEN}).status_code == 400
    assert "Log out" not in html(client.get("/"))


def test_csrf_token_from_another_session_is_refused(app, owner, pictures):
    other = app.test_client()
    foreign = csrf_from(html(other.get("/login")))
    assert owner.post(f"/pictures/{pictures['new']}/rate",
                      data={"rating": "like", "csrf_token": foreign}).status_code == 403


def test_cross_site_origin_is_refused(owner, store, pictures):
    csrf = csrf_from(html(owner.get("/")))
    response = owner.post(f"/pictures/{pictures['new']}/rate", data={"rating": "like", "csrf_token": csrf},
                          headers={"Origin": "http://evil.example"})
    assert response.status_code == 403 and ratings(store) == [(pictures["old"], "thumb", 1)]
    same = owner.post(f"/pictures/{pictures['new']}/rate", data={"rating": "like", "csrf_token": csrf},
                      headers={"Origin": "http://localhost"})
    assert same.status_code == 303


def test_login_rotates_the_session(client):
    before = csrf_from(html(client.get("/login")))
    login(client)
    assert csrf_from(html(client.get("/"))) != before


def test_new_token_invalidates_old_sessions(store, state_dir, pictures):
    first = make_app(store, state_dir)
    client = first.test_client()
    login(client)
    assert "Log out" in html(client.get("/"))
    from frame.config import Config, WebConfig
    from frame.daemon.http.app import create_app
    from frame.web import create_blueprint

    config = Config(state_dir=str(state_dir), web=WebConfig(token="another-owner-token-99"))
    second = create_app(config, store, token="another-owner-token-99", state_dir=state_dir, pages=create_blueprint)
    second_client = second.test_client()
    second_client.set_cookie("frame_session", client.get_cookie("frame_session").value)
    assert "Log out" not in html(second_client.get("/"))


@pytest.mark.parametrize("value", ["6", "0", "-1", "loved", "", "1.5", "like\x00"])
def test_bad_rating_values(owner, store, pictures, value):
    csrf = csrf_from(html(owner.get("/")))
    response = owner.post(f"/pictures/{pictures['new']}/rate", data={"rating": value, "csrf_token": csrf})
    assert response.status_code == 400 and "rating: must be like, dislike or 1 to 5 stars" in html(response)
    assert ratings(store) == [(pictures["old"], "thumb", 1)]


def test_rating_unknown_picture_is_404(owner):
    csrf = csrf_from(html(owner.get("/")))
    assert owner.post("/pictures/999/rate", data={"rating": "like", "csrf_token": csrf}).status_code == 404
    assert owner.post("/pictures/abc/rate", data={"rating": "like", "csrf_token": csrf}).status_code == 404


@pytest.mark.parametrize(("prompt", "message"), [
    ("", "prompt must not be empty"),
    ("   ", "prompt must not be empty"),
    ("x" * 301, "prompt is too long"),
    ("a cat\x1b[31m", "prompt contains a control character U+001B"),
    ("a \u202eflipped cat", "prompt contains a control character U+202E (RIGHT-TO-LEFT OVERRIDE)"),
])
def test_bad_prompts_are_rejected(owner, store, prompt, message):
    csrf = csrf_from(html(owner.get("/queue")))
    response = owner.post("/queue", data={"prompt": prompt, "csrf_token": csrf})
    assert response.status_code == 400 and message in html(response)
    assert store.queued_prompts() == []


def test_blocklisted_prompt_is_rejected(store, state_dir, pictures):
    from frame.config import Config, FeedsConfig, WebConfig

    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN), feeds=FeedsConfig(blocklist=("gore",)))
    client = make_app(store, state_dir, config=config).test_client()
    login(client)
    csrf = csrf_from(html(client.get("/queue")))
    response = client.post("/queue", data={"prompt": "Gore in the rain", "csrf_token": csrf})
    assert response.status_code == 400 and "feeds.blocklist" in html(response)
    assert store.queued_prompts() == []


def test_oversized_form_is_refused(owner, store):
    csrf = csrf_from(html(owner.get("/queue")))
    response = owner.post("/queue", data={"prompt": "x" * 20000, "csrf_token": csrf})
    assert response.status_code == 413 and store.queued_prompts() == []


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/../etc", "javascript:alert(1)"])
def test_redirect_after_post_stays_on_site(owner, pictures, target):
    csrf = csrf_from(html(owner.get("/")))
    response = owner.post(f"/pictures/{pictures['new']}/rate",
                          data={"rating": "like", "csrf_token": csrf, "next": target})
    assert response.headers["Location"] == f"/pictures/{pictures['new']}"


@pytest.mark.parametrize("path", [
    "/pictures/../../token", "/pictures/1/../../token/image", "/pictures/%2e%2e/image",
    "/pictures/..%2f..%2ftoken/image", "/web-static/../auth.py", "/web-static/..%2fauth.py",
    "/web-static/%2e%2e/blueprint.py", "/pictures/-1/image", "/pictures/1.0/image", "/gallery/../token",
    "/render/preview?path=../token",
])
def test_path_traversal_is_404(owner, pictures, path):
    response = owner.get(path)
    assert response.status_code == 404, path
    assert b"owner-token" not in response.data


def test_stored_names_outside_the_gallery_are_not_served(owner, store, state_dir):
    (state_dir / "secret.png").write_bytes(b"\x89PNG not for you")
    for name in ("../secret.png", "/etc/passwd", "../token", "sub/../../secret.png"):
        picture_id = store.add_picture(file=name, prompt="evil row", why={"plot": name})
        for route in ("image", "thumb", "why.png"):
            assert owner.get(f"/pictures/{picture_id}/{route}").status_code == 404, (name, route)


def test_preview_comes_only_from_the_running_renders_folder(owner, controller, state_dir):
    folder = state_dir / "checkpoints" / "render-7"
    folder.mkdir(parents=True)
    (folder / "preview.png").write_bytes(b"\x89PNGpreview")
    controller.render = {"id": 7, "stage": "generating", "step": 1, "steps": 4, "preview": False}
    assert owner.get("/render/preview").status_code == 404  # no preview announced yet
    for bad_id in ("7", "../7", True, None):
        controller.render.update(id=bad_id, preview=True)
        assert owner.get("/render/preview").status_code == 404, bad_id
    controller.render["id"] = 7
    assert owner.get("/render/preview?id=../../token").data == b"\x89PNGpreview"


def test_gallery_page_must_be_a_small_number(owner):
    for value in ("0", "-1", "abc", "99999999", "1e3"):
        assert owner.get(f"/gallery?page={value}").status_code == 400


def test_login_is_rate_limited(client):
    for _ in range(10):
        assert login(client, "wrong-guess-123").status_code == 401
    response = login(client)  # even the right token waits until the window passes
    assert response.status_code == 429


def test_limiter_window_expires():
    now = [0.0]
    limiter = LoginLimiter(max_failures=2, window=60, clock=lambda: now[0])
    limiter.failed("a")
    limiter.failed("a")
    assert limiter.blocked("a") and not limiter.blocked("b")
    now[0] = 61
    assert not limiter.blocked("a")


def test_secret_key_is_created_once_with_0600(store, state_dir, pictures):
    client = make_app(store, state_dir).test_client()
    login(client)
    key_file = state_dir / "web-secret"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_bytes()
    again = make_app(store, state_dir).test_client()  # a daemon restart: same key, session still valid
    assert key_file.read_bytes() == key
    again.set_cookie("frame_session", client.get_cookie("frame_session").value)
    assert "Log out" in html(again.get("/"))


def test_security_headers(client):
    response = client.get("/")
    assert "default-src 'self'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"


def test_only_the_reviewed_routes_exist(app):
    """No route may run commands, reboot or read arbitrary files: new routes must be added here on purpose."""
    routes = sorted((rule.rule, ",".join(sorted(rule.methods - {"HEAD", "OPTIONS"})))
                    for rule in app.url_map.iter_rules() if rule.endpoint.startswith("web."))
    assert routes == [
        ("/", "GET"),
        ("/config", "GET"), ("/config", "POST"), ("/config/estimate", "POST"),
        ("/config/models/import", "POST"), ("/config/models/use", "POST"),  # issue 41: by name, or an http(s) URL
        ("/config/restart", "POST"),
        ("/config/restore", "POST"),
        ("/favicon.ico", "GET"), ("/gallery", "GET"), ("/login", "GET,POST"), ("/logout", "POST"),
        ("/logout-everywhere", "GET,POST"),  # GET: the page that asks first (issue 40)
        ("/pair", "POST"), ("/pair/<secret>", "GET,POST"), ("/pair/panel", "POST"),  # pairing a phone (issue 40)
        ("/pictures/<id:picture_id>", "GET"), ("/pictures/<id:picture_id>/delete", "GET"),
        ("/pictures/<id:picture_id>/delete", "POST"), ("/pictures/<id:picture_id>/image", "GET"),
        ("/pictures/<id:picture_id>/more-like-this", "POST"),
        ("/pictures/<id:picture_id>/panel", "GET"), ("/pictures/<id:picture_id>/preview.png", "GET"),
        ("/pictures/<id:picture_id>/rate", "POST"), ("/pictures/<id:picture_id>/reuse-seed", "POST"),
        ("/pictures/<id:picture_id>/show", "POST"), ("/pictures/<id:picture_id>/thumb", "GET"),
        ("/pictures/<id:picture_id>/why.png", "GET"), ("/queue", "GET,POST"),
        ("/queue/<id:prompt_id>/edit", "GET,POST"), ("/queue/<id:prompt_id>/move", "POST"),
        ("/queue/<id:prompt_id>/paint-now", "POST"),  # issue 40 item 16: first in the queue, and a render
        ("/queue/<id:prompt_id>/remove", "POST"), ("/render", "POST"),
        ("/render/preview", "GET"), ("/status", "GET"), ("/upload", "GET"), ("/upload", "POST"),
        ("/web-static/<path:filename>", "GET"),
    ]


def test_only_the_reviewed_api_routes_exist(app):
    """The JSON API's routes too (every change there needs the bearer token; the settings' also take a
    logged-in page session with its CSRF token): a new one is added here on purpose, after checking
    what it can change and delete."""
    routes = sorted((rule.rule, ",".join(sorted(rule.methods - {"HEAD", "OPTIONS"})))
                    for rule in app.url_map.iter_rules() if rule.endpoint.startswith(("api.", "api_settings.")))
    assert routes == [
        ("/api/models", "GET"), ("/api/models/import", "POST"), ("/api/models/use", "POST"),  # issue 41
        ("/api/pictures", "GET"), ("/api/pictures/<id:picture_id>", "DELETE"),
        ("/api/pictures/<id:picture_id>", "GET"), ("/api/pictures/<id:picture_id>/image", "GET"),
        ("/api/pictures/<id:picture_id>/rating", "POST"), ("/api/pictures/<id:picture_id>/reuse-seed", "POST"),
        ("/api/pictures/<id:picture_id>/variation", "POST"), ("/api/prompts", "GET"), ("/api/prompts", "POST"),
        ("/api/prompts/<id:prompt_id>", "DELETE"), ("/api/prompts/<id:prompt_id>", "PATCH"),
        ("/api/prompts/<id:prompt_id>/move", "POST"),
        ("/api/prompts/<id:prompt_id>/paint-now", "POST"),  # moves a waiting prompt first, starts a render
        ("/api/render", "POST"), ("/api/render/preview", "GET"),
        ("/api/settings", "GET"), ("/api/settings", "PUT"), ("/api/settings/restore", "POST"),
        ("/api/show/<id:picture_id>", "POST"), ("/api/status", "GET"),
    ]


def test_unsafe_token_file_breaks_login_not_the_pages(store, state_dir, pictures):
    """Without web.token the token file is used; one readable by others is refused with a clear message."""
    from frame.config import Config
    from frame.web import create_blueprint

    token_file = state_dir / "token"
    token_file.write_text("a-generated-owner-token\n", encoding="utf-8")
    token_file.chmod(0o644)
    from flask import Flask

    app = Flask("bare")
    app.register_blueprint(create_blueprint(Config(state_dir=str(state_dir)), store))
    client = app.test_client()
    assert client.get("/login").status_code == 200
    assert client.get("/").status_code == 303  # the pages need the owner, mounted without the daemon's app too
    response = login(client, "a-generated-owner-token")
    assert response.status_code == 503 and "chmod 600" in html(response)
    token_file.chmod(0o600)
    assert login(client, "a-generated-owner-token").status_code == 303
    assert "Log out" in html(client.get("/"))
