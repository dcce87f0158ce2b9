"""The settings page's models section (issue 41 item 6): the models in ``<state_dir>/models`` and the
configured one, their kind and stored precision (read by the daemon without onnx), and "use this
model" through the settings' own save; the same on ``/api/models``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from frame.daemon.models_folder import list_models, model_kind
from frame.daemon.onnx_dtypes import stored_precision
from frame.models import demo_model_path
from tests.web.conftest import TOKEN, csrf_from

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def demo_copy(target: Path, index: dict | None = None, activation: str | None = None,
              scheduler: dict | None = None) -> Path:
    shutil.copytree(demo_model_path(), target)
    if index is not None:
        data = json.loads((target / "model_index.json").read_text())
        (target / "model_index.json").write_text(json.dumps({**data, **index}))
    if activation is not None:
        config = json.loads((target / "text_encoder" / "config.json").read_text())
        (target / "text_encoder" / "config.json").write_text(json.dumps({**config, "hidden_act": activation}))
    if scheduler is not None:
        path = target / "scheduler" / "scheduler_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **scheduler}))
    return target


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """The demo model as frame model convert writes it in fp16 and uint8."""
    from frame.convert.files import Options, convert

    root = tmp_path_factory.mktemp("converted")
    out = {}
    for weights in ("fp16", "uint8"):
        convert(demo_model_path(), root / weights, Options(weights=weights))
        out[weights] = root / weights
    return out


def test_precision_is_read_from_the_weights(converted):
    assert stored_precision(demo_model_path() / "unet" / "model.onnx") == "fp32"
    assert stored_precision(converted["fp16"] / "unet" / "model.onnx") == "fp16"
    assert stored_precision(converted["uint8"] / "unet" / "model.onnx") == "uint8"


def test_a_hostile_graph_is_unknown_not_an_error(tmp_path):
    real = (demo_model_path() / "unet" / "model.onnx").read_bytes()
    cases = {"cut": real[: len(real) // 3], "length-past-end": b"\x3a\xff\xff\xff\xff\x0f" + b"\0" * 10,
             "long-varint": b"\xff" * 64, "empty": b"", "wire-type-7": b"\x3f" * 8}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert stored_precision(tmp_path / name) is None, name
    assert stored_precision(tmp_path / "missing") is None


def test_kinds_from_the_folders_files(tmp_path):
    assert model_kind(demo_model_path()) == "SD 1.x"
    assert model_kind(demo_copy(tmp_path / "sd2", activation="gelu")) == "SD 2.x"
    turbo = {"_class_name": "EulerAncestralDiscreteScheduler", "timestep_spacing": "trailing"}
    assert model_kind(demo_copy(tmp_path / "sdturbo", activation="gelu", scheduler=turbo)) == "SD Turbo"
    xl = {"_class_name": "StableDiffusionXLPipeline", "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"]}
    assert model_kind(demo_copy(tmp_path / "xl", index=xl, activation="gelu")) == "SDXL"
    assert model_kind(demo_copy(tmp_path / "xlturbo", index=xl, scheduler=turbo)) == "SDXL Turbo"
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "model_index.json").write_text("[not json")
    assert model_kind(tmp_path / "junk") == "unknown"


def test_listing_of_the_models_folder_and_the_configured_source(state_dir, converted, tmp_path):
    models = state_dir / "models"
    models.mkdir()
    shutil.copytree(converted["fp16"], models / "dreamshaper")
    shutil.copytree(converted["uint8"], models / ".half.import")  # an import in progress: not a model yet
    (models / "empty").mkdir()
    entries = {e.name: e for e in list_models(state_dir, "demo")}
    assert set(entries) == {"dreamshaper", "demo"}
    assert (entries["dreamshaper"].kind, entries["dreamshaper"].precision) == ("SD 1.x", "fp16")
    assert entries["demo"].in_use and not entries["dreamshaper"].in_use
    elsewhere = demo_copy(tmp_path / "mine")
    entries = {e.name: e for e in list_models(state_dir, str(elsewhere))}
    assert entries["mine"].in_use and entries["mine"].precision == "fp32"
    served = list_models(state_dir, "https://bob:hunter2@nas.local/models/sd15/?key=abc")[-1]
    assert served.in_use and "hunter2" not in served.source and "abc" not in served.source


def test_the_page_lists_them_and_uses_one(owner, state_dir, converted):
    shutil.copytree(converted["uint8"], state_dir / "models" / "small")
    page = owner.get("/config").get_data(as_text=True)
    section = page[page.index('id="models-title"'):]
    assert "small" in section and "SD 1.x · uint8" in section and "SD 1.x, random weights (the demo) · fp32" in section
    assert 'href="#models-title"' in page
    response = owner.post("/config/models/use", data={"name": "small", "csrf_token": csrf_from(page)})
    assert response.status_code == 303 and response.headers["Location"].endswith("/config#models-title")
    page = owner.get("/config").get_data(as_text=True)
    assert "Tonight&#39;s picture is painted with small." in page
    assert str(state_dir / "models" / "small") in (state_dir / "settings.yaml").read_text()
    small = page[page.index('data-model="small"'):]
    assert small.index("(in use)") < small.index("</li>")


def test_use_refuses_what_is_not_a_model_there(owner, state_dir):
    page = owner.get("/config").get_data(as_text=True)
    for name in ("../../etc", "nothing", "/tmp"):
        owner.post("/config/models/use", data={"name": name, "csrf_token": csrf_from(page)})
        page = owner.get("/config").get_data(as_text=True)
        assert "Not changed: no model named" in page
    assert not (state_dir / "settings.yaml").exists()


def test_use_goes_through_the_settings_checks(owner, state_dir, monkeypatch):
    """The settings' own rules apply: a model.source set in the environment wins over the page."""
    demo_copy(state_dir / "models" / "m")
    monkeypatch.setenv("FRAME_MODEL__SOURCE", "demo")
    page = owner.get("/config").get_data(as_text=True)
    owner.post("/config/models/use", data={"name": "m", "csrf_token": csrf_from(page)})
    page = owner.get("/config").get_data(as_text=True)
    assert "Not changed: is set from environment variable FRAME_MODEL__SOURCE" in page
    assert not (state_dir / "settings.yaml").exists()


def test_use_needs_the_owner(client, state_dir):
    demo_copy(state_dir / "models" / "m")
    assert client.post("/config/models/use", data={"name": "m"}).status_code == 401
    assert client.get("/api/models").status_code == 401
    assert client.post("/api/models/use", json={"name": "m"}).status_code == 401


def test_the_api_lists_and_uses(client, state_dir, converted):
    shutil.copytree(converted["fp16"], state_dir / "models" / "half")
    listed = client.get("/api/models", headers=AUTH).get_json()["models"]
    assert {(m["name"], m["precision"], m["in_use"]) for m in listed} == {("half", "fp16", False),
                                                                          ("demo", "fp32", True)}
    assert client.post("/api/models/use", json={"name": "nothing"}, headers=AUTH).status_code == 404
    assert client.post("/api/models/use", json={"name": 3}, headers=AUTH).status_code == 400
    answer = client.post("/api/models/use", json={"name": "half"}, headers=AUTH)
    assert answer.status_code == 200 and answer.get_json()["changed"] == ["model.source"]
    listed = client.get("/api/models", headers=AUTH).get_json()["models"]
    assert [m["name"] for m in listed if m["in_use"]] == ["half"]


def wait_status(owner, text: str, seconds: float = 120.0) -> str:
    import time

    deadline = time.monotonic() + seconds
    while True:
        page = owner.get("/status").get_data(as_text=True)
        if text in page or time.monotonic() > deadline:
            return page
        time.sleep(0.3)


def test_import_from_the_page_shows_on_the_status_page(owner, tmp_path):
    """A URL that answers 404: the child starts, the status page follows it, and its failure is one
    line with the URL's credentials hidden (the end-to-end import: tests/daemon/test_model_import_child.py)."""
    from tests.engine.http_server import RangeServer

    server = RangeServer(str(tmp_path)).start()
    try:
        url = server.url("missing.safetensors").replace("http://", "http://bob:hunter2@")
        page = owner.get("/config").get_data(as_text=True)
        assert 'id="import-url"' in page
        response = owner.post("/config/models/import", data={"url": url, "name": "", "weights": "uint8",
                                                             "csrf_token": csrf_from(page)})
        assert response.status_code == 303 and response.headers["Location"].endswith("/status#model-import")
        page = owner.get("/status").get_data(as_text=True)
        assert "Importing missing" in page or "The import failed" in page
        page = wait_status(owner, "The import failed")
    finally:
        server.stop()
    assert "The import failed:" in page and "404" in page and "hunter2" not in page
    config = owner.get("/config").get_data(as_text=True)
    assert "The last import (missing) failed" in config and "hunter2" not in config


def test_import_refused_during_a_render(owner, controller, state_dir):
    controller.render = {"render_id": 1, "stage": "generating", "step": 1, "steps": 8}
    page = owner.get("/config").get_data(as_text=True)
    assert "An import waits until the render has finished" in page and 'id="import-url"' not in page
    owner.post("/config/models/import", data={"url": "http://127.0.0.1:9/x.safetensors",
                                              "csrf_token": csrf_from(page)})
    page = owner.get("/config").get_data(as_text=True)
    assert "No import started: not while a render is running" in page
    assert not (state_dir / "model-import.json").exists()


def test_import_refusals_on_the_page_and_the_api(owner, client, state_dir):
    page = owner.get("/config").get_data(as_text=True)
    for form, said in (({"url": "file:///etc/passwd"}, "only http:// and https:// URLs"),
                       ({"url": "http://nas/x.safetensors", "name": "../evil"}, "a model&#39;s name is letters"),
                       ({"url": "http://nas/x.safetensors", "weights": "fp8"}, "the precision is one of")):
        owner.post("/config/models/import", data={**form, "csrf_token": csrf_from(page)})
        page = owner.get("/config").get_data(as_text=True)
        assert f"No import started: {said}" in page, said
    assert client.post("/config/models/import", data={"url": "http://nas/x"}).status_code in (400, 401, 403)
    answer = client.post("/api/models/import", json={"url": "ftp://nas/x.safetensors"}, headers=AUTH)
    assert answer.status_code == 400 and "only http://" in answer.get_json()["error"]
    assert client.post("/api/models/import", json={"url": "http://nas/x"}).status_code == 401
    assert not (state_dir / "model-import.json").exists()


def test_api_import_refused_during_a_render(client, controller, state_dir):
    controller.render = {"render_id": 1, "stage": "generating", "step": 1, "steps": 8}
    answer = client.post("/api/models/import", json={"url": "http://127.0.0.1:9/x.safetensors"}, headers=AUTH)
    assert answer.status_code == 409 and "not while a render is running" in answer.get_json()["error"]
    assert client.get("/api/models", headers=AUTH).get_json()["import"] is None
