"""Who may read what (issue 40 item 2): without the owner nothing but the way in, and with
``web.public_gallery`` the painted pictures, never an upload. Every route of the app is walked, so a
route added later without protection fails here until it is reviewed and, if it must be public,
allow-listed below."""

from __future__ import annotations

import pytest

from frame.config import Config, WebConfig
from frame.daemon.store import gallery
from tests.web.conftest import TOKEN, login, make_app, write_png

# anyone may have these (frame/web/access.py: ALWAYS_PUBLIC); any other route needs the owner
ALWAYS_PUBLIC = {"web.login", "web.static", "web.favicon", "web.pair_link", "web.pair_code", "web.pair_panel"}
PAIR_POSTS = {"web.pair_code", "web.pair_panel"}  # the way in too, but forms only (no GET to answer)
# with web.public_gallery: true, also these, for GET, and only for painted pictures
GALLERY = {"web.gallery", "web.thumb", "web.image"}
PHOTO_CAPTION = "grandma's birthday, the kitchen"


@pytest.fixture
def photo(store, state_dir, pictures) -> int:
    """An uploaded family photo, next to the two painted pictures."""
    write_png(state_dir / "gallery" / "photo.png", (220, 180, 160), (640, 480))
    return store.add_picture(file="photo.png", bytes=1000, prompt=PHOTO_CAPTION, origin=gallery.UPLOAD_ORIGIN,
                             width=640, height=480)


def public_gallery_app(store, state_dir, controller):
    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN, public_gallery=True))
    return make_app(store, state_dir, controller, config=config)


def every_request(app, picture_id: int, prompt_id: int = 1):
    """(endpoint, method, url) for every route and method of the app, with real ids filled in."""
    with app.test_request_context():
        for rule in app.url_map.iter_rules():
            values = {}
            for name, converter in rule._converters.items():
                kind = type(converter).__name__
                values[name] = ("frame.css" if kind == "PathConverter"
                                else prompt_id if name == "prompt_id" else picture_id)
            url = rule.build(values, append_unknown=False)[1]
            for method in sorted(rule.methods - {"OPTIONS", "HEAD"}):
                yield rule.endpoint, method, url


def assert_refused(response, endpoint: str, method: str, url: str, gallery_open: bool) -> None:
    where = f"{method} {url} ({endpoint})"
    if url.startswith("/api/"):
        assert response.status_code == 401, where
        assert "owner token" in response.get_json()["error"], where
    elif method == "GET":
        assert response.status_code == 303, where
        if gallery_open and endpoint == "web.now":  # "/" of a frame with a public gallery: the gallery
            assert response.headers["Location"] == "/gallery", where
        else:
            assert response.headers["Location"].startswith("/login?next="), where
    else:
        assert response.status_code == 401, where
        assert "Log in" in response.get_data(as_text=True), where


def walk(app, picture_id: int, public: set[str]) -> set[str]:
    """Ask for every route logged out; asserts each is refused unless its endpoint is in ``public``.
    Returns the public endpoints that answered."""
    client = app.test_client()
    answered = set()
    for endpoint, method, url in every_request(app, picture_id):
        response = client.open(url, method=method)
        if endpoint in public:  # its POST (the login form) checks its CSRF token itself
            if method == "GET":
                assert response.status_code in (200, 302), (endpoint, url, response.status_code)
                answered.add(endpoint)
            continue
        assert_refused(response, endpoint, method, url, "web.gallery" in public)
    return answered


def test_logged_out_nothing_but_the_way_in(app, store, pictures, photo, controller):
    before = store.count_pictures(), len(store.queued_prompts())
    for picture_id in (pictures["new"], photo):
        assert walk(app, picture_id, ALWAYS_PUBLIC) == ALWAYS_PUBLIC - PAIR_POSTS
    assert (store.count_pictures(), len(store.queued_prompts())) == before
    assert controller.renders == 0 and controller.shown == []


def test_the_photo_original_needs_the_owner(app, client, photo):
    """The finding itself: /pictures/N/image of an uploaded photo answered 200 to anyone on the LAN."""
    assert client.get(f"/pictures/{photo}/image").status_code == 303
    assert client.get(f"/api/pictures/{photo}/image").status_code == 401
    login(client)
    assert client.get(f"/pictures/{photo}/image").status_code == 200


def test_the_token_opens_every_read(app, pictures, photo):
    """The JSON API keeps working with the owner token, reads included (the CLI sends it)."""
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/api/status", "/api/pictures", f"/api/pictures/{photo}", f"/api/pictures/{photo}/image",
                 "/api/prompts", "/api/settings", "/", "/gallery", "/status"):
        assert client.get(path, headers=bearer).status_code == 200, path
    assert client.get("/api/status", headers={"Authorization": "Bearer wrong-token-guess"}).status_code == 401


def test_a_logged_in_page_reads_the_status_api(owner):
    """The page's script polls /api/status with its session cookie, no token."""
    assert owner.get("/api/status").status_code == 200


def test_a_wrong_token_on_reads_counts_into_the_limiter(app):
    client = app.test_client()
    for _ in range(10):
        assert client.get("/api/pictures", headers={"Authorization": "Bearer not-it-at-all"}).status_code == 401
    assert client.get("/api/pictures", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 429


def test_after_login_the_page_asked_for_opens(client, pictures):
    response = client.get(f"/pictures/{pictures['old']}?x=1")
    assert response.headers["Location"] == f"/login?next=/pictures/{pictures['old']}?x%3D1"
    page = client.get(response.headers["Location"])
    assert f'value="/pictures/{pictures["old"]}?x=1"' in page.get_data(as_text=True)


def test_the_login_page_offers_no_private_links(client):
    body = client.get("/login").get_data(as_text=True)
    for private in ("/gallery", "/status", "/config", "/queue"):
        assert f'href="{private}"' not in body, private


def test_public_gallery_shows_painted_pictures_only(store, state_dir, pictures, photo, controller):
    app = public_gallery_app(store, state_dir, controller)
    assert walk(app, pictures["new"], ALWAYS_PUBLIC | GALLERY) == (ALWAYS_PUBLIC - PAIR_POSTS) | GALLERY
    # an upload's tile and original are refused, exactly as a missing picture's
    assert walk(app, photo, ALWAYS_PUBLIC | {"web.gallery"}) == (ALWAYS_PUBLIC - PAIR_POSTS) | {"web.gallery"}
    client = app.test_client()
    body = client.get("/gallery").get_data(as_text=True)
    assert f"/pictures/{pictures['new']}/thumb" in body and f"/pictures/{pictures['old']}/thumb" in body
    assert f"/pictures/{photo}/" not in body and PHOTO_CAPTION not in body and "grandma" not in body
    assert "(2)" in body  # the count is of the painted pictures
    for private in ("/status", "/config", "/queue", "/upload", "favourites=1", "<form"):
        assert private not in body, private
    # the tiles open the picture itself, not its details page (model, seed, taste: the owner's)
    assert f'href="/pictures/{pictures["new"]}/image"' in body
    assert client.get("/").headers["Location"] == "/gallery"


def test_public_gallery_the_owner_still_sees_everything(store, state_dir, pictures, photo, controller):
    client = public_gallery_app(store, state_dir, controller).test_client()
    login(client)
    body = client.get("/gallery").get_data(as_text=True)
    assert f"/pictures/{photo}/thumb" in body and "(3)" in body and "favourites=1" in body


def test_public_gallery_is_a_checked_config_key(tmp_path):
    from frame.config import load_config
    from frame.errors import ConfigError

    assert load_config(_yaml(tmp_path, ""), environ={}).web.public_gallery is False
    assert load_config(_yaml(tmp_path, "web:\n  public_gallery: true\n"), environ={}).web.public_gallery is True
    with pytest.raises(ConfigError, match=r"web\.public_gallery: must be true or false"):
        load_config(_yaml(tmp_path, "web:\n  public_gallery: 'yes please'\n"), environ={})


def _yaml(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path
