import pytest

from frame.daemon.http.app import create_app
from frame.daemon.http.contract import Busy
from frame.daemon.store import gallery
from tests.daemon.conftest import add_picture

TOKEN = "owner-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeController:
    """Records what the API asked the daemon to do (the real one is tested in test_service)."""

    def __init__(self) -> None:
        self.rendering = False
        self.shown: list[int] = []

    def status(self):
        return {"state": "idle", "shown": None, "render": None}

    def render_now(self):
        if self.rendering:
            raise Busy("a render is already running")
        self.rendering = True
        return {"render": "started"}

    def show(self, picture_id):
        self.shown.append(picture_id)
        return {"showing": picture_id}


@pytest.fixture
def controller():
    return FakeController()


@pytest.fixture
def client(config, store, controller, tmp_path):
    app = create_app(config, store, token=TOKEN, controller=controller, state_dir=tmp_path)
    return app.test_client()


@pytest.fixture
def picture(store, tmp_path):
    folder = gallery.gallery_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / "p.png").write_bytes(b"\x89PNG fake")
    return add_picture(store, file="p.png", why={"sentence": "because"}, theme="sea")


def test_reads_need_the_token(client, picture):
    """Issue 40: reads were open to the LAN (an uploaded photo's original with them)."""
    for path in ("/api/status", "/api/pictures", f"/api/pictures/{picture}", f"/api/pictures/{picture}/image",
                 "/api/prompts", "/api/render/preview", "/api/settings"):
        assert client.get(path).status_code == 401, path
    assert client.get("/api/status", headers=AUTH).get_json()["state"] == "idle"
    listing = client.get("/api/pictures", headers=AUTH).get_json()
    assert listing["total"] == 1 and listing["pictures"][0]["theme"] == "sea"
    detail = client.get(f"/api/pictures/{picture}", headers=AUTH).get_json()
    assert detail["why"] == {"sentence": "because"}
    image = client.get(f"/api/pictures/{picture}/image", headers=AUTH)
    assert image.status_code == 200 and image.data == b"\x89PNG fake"


@pytest.mark.parametrize(("method", "path"), [
    ("post", "/api/pictures/1/rating"), ("post", "/api/prompts"), ("post", "/api/render"),
    ("post", "/api/show/1")])
@pytest.mark.parametrize("header", [None, "Bearer wrong-token-xxxxx", TOKEN])
def test_every_change_needs_the_token(client, picture, store, method, path, header):
    headers = {"Authorization": header} if header else {}
    response = getattr(client, method)(path, json={"rating": 1, "prompt": "x"}, headers=headers)
    assert response.status_code == 401 and "token" in response.get_json()["error"]
    assert store.query("SELECT COUNT(*) FROM ratings")[0][0] == 0 and store.queued_prompts() == []


@pytest.mark.parametrize(("body", "kind", "value"), [
    ({"rating": 1}, "thumb", 1), ({"rating": -1}, "thumb", -1), ({"stars": 4}, "stars", 4)])
def test_rating(client, picture, store, body, kind, value):
    response = client.post(f"/api/pictures/{picture}/rating", json=body, headers=AUTH)
    assert response.status_code == 200
    assert (response.get_json()["rating_kind"], response.get_json()["rating_value"]) == (kind, value)


@pytest.mark.parametrize("body", [
    b"{not json", b"[1]", b'{"rating": 2}', b'{"rating": "1"}', b'{"rating": true}', b'{"stars": 6}',
    b'{"stars": 3.5}', b'{"rating": 1, "stars": 5}', b"{}"])
def test_bad_ratings_store_nothing(client, picture, store, body):
    response = client.post(f"/api/pictures/{picture}/rating", data=body, headers=AUTH,
                           content_type="application/json")
    assert response.status_code == 400 and response.get_json()["error"]
    assert store.query("SELECT COUNT(*) FROM ratings")[0][0] == 0


def test_unknown_ids_are_404_json(client, picture):
    for response in (client.get("/api/pictures/999", headers=AUTH),
                     client.get("/api/pictures/999/image", headers=AUTH),
                     client.post("/api/pictures/999/rating", json={"rating": 1}, headers=AUTH),
                     client.post("/api/show/999", headers=AUTH), client.get("/api/nothing", headers=AUTH)):
        assert response.status_code == 404 and "error" in response.get_json()


def test_queue_prompt_sanitised(client, store):
    response = client.post("/api/prompts", json={"prompt": "  a fox\x00 in\nsnow ", "theme": "animals"},
                           headers=AUTH)
    assert response.status_code == 201
    assert [(p.prompt, p.theme) for p in store.queued_prompts()] == [("a fox in snow", "animals")]
    assert client.get("/api/prompts", headers=AUTH).get_json()["prompts"][0]["prompt"] == "a fox in snow"


@pytest.mark.parametrize("body", [{"prompt": ""}, {"prompt": 5}, {"prompt": "x", "colour": "red"},
                                  {"negative_prompt": "x"}, {"prompt": "x", "theme": ["a"]}])
def test_bad_prompts_store_nothing(client, store, body):
    assert client.post("/api/prompts", json=body, headers=AUTH).status_code == 400
    assert store.queued_prompts() == []


def test_blocklisted_prompt_is_refused(tmp_path, store):
    from tests.daemon.conftest import make_config

    config = make_config(tmp_path, feeds={"blocklist": ("gore",)})
    client = create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()
    assert client.post("/api/prompts", json={"prompt": "much GORE"}, headers=AUTH).status_code == 422
    assert store.queued_prompts() == []


def test_render_and_show(client, picture, controller):
    assert client.post("/api/render", headers=AUTH).status_code == 202
    busy = client.post("/api/render", headers=AUTH)
    assert busy.status_code == 409 and "already" in busy.get_json()["error"]
    assert client.post(f"/api/show/{picture}", headers=AUTH).status_code == 202
    assert controller.shown == [picture]


def test_without_controller_actions_are_503(config, store, tmp_path, picture):
    client = create_app(config, store, token=TOKEN, state_dir=tmp_path).test_client()
    assert client.post("/api/render", headers=AUTH).status_code == 503
    assert client.get("/api/status", headers=AUTH).get_json()["state"] == "not running"


def test_oversized_body_is_413(client):
    response = client.post("/api/prompts", data=b"x" * 100_000, headers=AUTH, content_type="application/json")
    assert response.status_code == 413 and "error" in response.get_json()


def test_render_preview(client, controller, tmp_path):
    assert client.get("/api/render/preview", headers=AUTH).status_code == 404
    controller.status = lambda: {"state": "rendering", "render": {"id": 7}}
    assert client.get("/api/render/preview", headers=AUTH).status_code == 404
    from frame.daemon.jobs.night import job_dir

    job_dir(tmp_path, 7).mkdir(parents=True)
    (job_dir(tmp_path, 7) / "preview.png").write_bytes(b"\x89PNG preview")
    response = client.get("/api/render/preview", headers=AUTH)
    assert response.status_code == 200 and response.data == b"\x89PNG preview"


def test_a_picture_deleted_between_the_check_and_the_rating_is_404(client, picture, store, tmp_path, monkeypatch):
    """Retention deleted the picture after the route had checked it exists; Store.rate's KeyError
    was a 500 (seen once in ~450 ratings during a soak)."""
    from frame.daemon import deletion

    rate = store.rate

    def retention_first(picture_id, kind, value):
        deletion.delete_picture(store, tmp_path, picture_id, {})
        return rate(picture_id, kind, value)

    monkeypatch.setattr(store, "rate", retention_first)
    response = client.post(f"/api/pictures/{picture}/rating", json={"rating": 1}, headers=AUTH)
    assert response.status_code == 404 and "no picture" in response.get_json()["error"]
    assert store.query("SELECT COUNT(*) FROM ratings")[0][0] == 0
