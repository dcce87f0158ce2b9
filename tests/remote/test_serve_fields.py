"""``frame serve-render`` checks every field of a request as AUTOMATIC1111's API types it, before the
request is queued: a wrong type or a size the server cannot hold is a 422 JSON answer naming the field,
a body that is not JSON (or nested too deep to parse) is a 400 JSON answer, and no error is ever an
HTML page. Against a real server on 127.0.0.1 (the demo model, frame's engine)."""

from __future__ import annotations

import base64
import io

import pytest
import requests
from PIL import Image

from frame.cli.serve_render import start_server
from frame.config.schema import Config
from frame.models import resolve_model_source
from frame.serve.render import fields

TOKEN = "serve-token-for-fields"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GIB = 1 << 30
LEFT_OUT = object()


@pytest.fixture(scope="module")
def served():
    with pytest.MonkeyPatch.context() as patch:  # a server with 8 GiB of memory, whatever this machine has
        patch.setattr(fields, "total_memory_bytes", lambda: 8 * GIB)
        server = start_server(resolve_model_source("demo"), "frame", Config(), TOKEN, "127.0.0.1:0",
                              max_waiting=2)
    yield server
    server.close()


def post(served, body=None, data=None, path="/sdapi/v1/txt2img", headers=AUTH):
    return requests.post(served.url + path, json=body, data=data, headers=headers, timeout=10)


@pytest.mark.parametrize("change, words", [
    ({"width": 16384, "height": LEFT_OUT}, "width x height"),  # the model's own height (512): too large
    ({"height": 16384, "width": LEFT_OUT}, "width x height"),
    ({"width": 100000}, "width must be from 1 to 16384"),
    ({"width": 4096.0, "height": 4096}, "width x height"),  # a whole float is the integer A1111 would take
    ({"width": 64.5}, "width must be an integer"),
    ({"width": "64"}, "width must be an integer"),
    ({"width": True}, "width must be an integer"),
    ({"width": -64, "height": 64}, "width must be"),
    ({"steps": 2.5}, "steps must be an integer"),
    ({"steps": [2]}, "steps must be an integer"),
    ({"steps": 0}, "steps must be"),
    ({"cfg_scale": "high"}, "cfg_scale must be a number"),
    ({"cfg_scale": 1e9}, "cfg_scale must be from 0 to 100"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"seed": {"a": 1}}, "seed must be an integer"),
    ({"sampler_name": {"a": 1}}, "sampler_name must be a string"),
    ({"sampler_index": ["Euler"]}, "sampler_index must be a string"),
    ({"prompt": ["a", "cat"]}, "prompt must be a string"),
    ({"negative_prompt": 5}, "negative_prompt must be a string"),
    ({"batch_size": "1"}, "batch_size must be an integer"),
    ({"n_iter": 2}, "n_iter must be 1"),
])
def test_each_field_is_checked_with_a_422_naming_it(served, change, words):
    body = {"prompt": "x", "steps": 2, "width": 64, "height": 64, **change}
    answer = post(served, {key: value for key, value in body.items() if value is not LEFT_OUT})
    assert answer.status_code == 422, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    assert words in answer.json()["detail"]


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN"])
def test_a_number_json_cannot_hold_is_refused(served, value):
    data = f'{{"prompt": "x", "steps": 2, "width": 64, "height": 64, "cfg_scale": {value}}}'.encode()
    answer = post(served, data=data, headers={**AUTH, "Content-Type": "application/json"})
    assert answer.status_code == 422 and "cfg_scale must be a number" in answer.json()["detail"]


def test_img2img_fields_are_checked_too(served):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (40, 90, 140)).save(buffer, format="PNG")
    picture = base64.b64encode(buffer.getvalue()).decode("ascii")
    answer = post(served, {"prompt": "x", "init_images": [picture], "width": 64.25}, path="/sdapi/v1/img2img")
    assert answer.status_code == 422 and "width must be an integer" in answer.json()["detail"]
    answer = post(served, {"prompt": "x", "init_images": [picture], "include_init_images": "yes"},
                  path="/sdapi/v1/img2img")
    assert answer.status_code == 422 and "include_init_images must be true or false" in answer.json()["detail"]


def test_the_pixel_cap_follows_the_servers_memory(served):
    """8 GiB: a quarter of it at 2 KiB per pixel is 1024 x 1024; 2048 x 2048 (8.5 GB and over a minute
    for one step when it was accepted) is refused with the reason, before it is queued."""
    assert fields.pixel_limit(8 * GIB) == 1024 * 1024
    assert fields.pixel_limit(64 * GIB) == fields.MAX_PIXELS
    answer = post(served, {"prompt": "x", "steps": 1, "width": 2048, "height": 2048})
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert "at most 1048576 pixels" in detail and "memory" in detail and "2048x2048" in detail


@pytest.mark.parametrize("data", ["[" * 100_000, "{not json", '"a string"', "[1, 2]", "\xff\xfe"])
def test_bodies_that_are_not_a_json_object_are_json_errors(served, data):
    answer = post(served, data=data.encode("utf-8", "surrogateescape"),
                  headers={**AUTH, "Content-Type": "application/json"})
    assert answer.status_code in (400, 422), answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.json()["detail"]


def test_http_errors_are_json_not_html(served):
    for answer in (requests.get(served.url + "/nowhere", headers=AUTH, timeout=10),
                   requests.get(served.url + "/sdapi/v1/txt2img", headers=AUTH, timeout=10)):
        assert answer.status_code in (404, 405)
        assert answer.headers["Content-Type"].startswith("application/json"), answer.text[:200]
        assert answer.json()["detail"]
