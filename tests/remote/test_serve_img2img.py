"""``frame serve-render`` img2img on 127.0.0.1 with the demo model (it has a vae_encoder): frame's own
client against frame's server equals a local ``paint(pipe, init_image=..., strength=...)``; each
bad field is a 422 naming it; a model without an encoder is refused with the reason."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import shutil
import threading

import numpy as np
import pytest
import requests
from PIL import Image

from frame.cli.serve_render import start_server
from frame.config.schema import Config
from frame.diffusion import load_pipeline
from frame.models import resolve_model_source
from frame.remote import RemoteJob, RemoteUnavailable
from frame.serve.render.engines import onnxruntime_installed
from tests.painting import paint
from tests.remote.test_serve import TOKEN, run_clients, through

AUTH = {"Authorization": f"Bearer {TOKEN}"}
JOB = RemoteJob(prompt="the same harbour at night", negative_prompt="blurry", steps=4, guidance=7.5,
                sampler="euler_a", seed=77, width=128, height=64, denoising_strength=0.5)


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def gradient(width: int, height: int) -> Image.Image:
    """A starting picture that is not the render size (so the server has to fit it)."""
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None, None]
    rgb = np.concatenate([np.broadcast_to(x, (height, width, 1)), np.broadcast_to(y, (height, width, 1)),
                          np.full((height, width, 1), 90, np.float32)], axis=2)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


@pytest.fixture(scope="module")
def pipe():
    return load_pipeline(resolve_model_source("demo"))


@pytest.fixture(scope="module")
def start_picture(pipe):
    """The frame's own picture of last night, at the render size: "more like this"."""
    return paint(pipe, "a quiet harbour at dawn", steps=2, seed=5, width=JOB.width, height=JOB.height)


@pytest.fixture(scope="module")
def served():
    server = start_server(resolve_model_source("demo"), "frame", Config(), TOKEN, "127.0.0.1:0", max_waiting=2)
    yield server
    server.close()


def local(pipe, init, job: RemoteJob = JOB) -> Image.Image:
    return paint(pipe, job.prompt, negative_prompt=job.negative_prompt, steps=job.steps, guidance=job.guidance,
                         sampler=job.sampler, seed=job.seed, width=job.width, height=job.height, init_image=init,
                         strength=job.denoising_strength)


def post(server, body: dict) -> requests.Response:
    """A raw POST to img2img while this (main) thread runs the server's jobs."""
    out = {}

    def client():
        out["answer"] = requests.post(server.url + "/sdapi/v1/img2img", json=body, headers=AUTH, timeout=120)

    run_clients(server, client)
    return out["answer"]


def test_frame_to_frame_img2img_is_bit_identical_to_a_local_render(served, pipe, start_picture):
    result = through(served, dataclasses.replace(JOB, init_image=png(start_picture)))
    expected = local(pipe, start_picture)
    assert np.array_equal(np.asarray(result.image), np.asarray(expected))
    assert result.image.info["parameters"] == expected.info["parameters"]
    assert "Denoising strength: 0.5" in expected.info["parameters"]
    assert (result.parameters.seed, result.parameters.steps, result.parameters.width) == (77, 4, 128)


def test_a1111_request_with_data_url_and_other_size_is_fitted_as_the_pipeline_does(served, pipe):
    start = gradient(150, 110)  # wider than tall but not 2:1: scaled to cover 128x64, centre-cropped
    body = {"prompt": JOB.prompt, "negative_prompt": JOB.negative_prompt, "steps": 4, "cfg_scale": 7.5,
            "sampler_name": "Euler a", "seed": 77, "width": 128, "height": 64, "denoising_strength": 0.5,
            "init_images": ["data:image/png;base64," + base64.b64encode(png(start)).decode("ascii")]}
    answer = post(served, body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    image = Image.open(io.BytesIO(base64.b64decode(data["images"][0])))
    assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(local(pipe, start)))
    info = json.loads(data["info"])
    assert (info["seed"], info["denoising_strength"], info["width"], info["height"]) == (77, 0.5, 128, 64)
    assert data["parameters"]["init_images"] is None  # not echoed back, as A1111 without include_init_images


def test_resize_mode_0_stretches_the_picture_first(served, pipe):
    start = gradient(150, 110)
    body = {"prompt": JOB.prompt, "negative_prompt": JOB.negative_prompt, "steps": 4, "sampler_name": "Euler a",
            "seed": 77, "width": 128, "height": 64, "denoising_strength": 0.5, "resize_mode": 0,
            "init_images": [base64.b64encode(png(start)).decode("ascii")]}
    answer = post(served, body)
    assert answer.status_code == 200, answer.text
    image = Image.open(io.BytesIO(base64.b64decode(answer.json()["images"][0]))).convert("RGB")
    assert np.array_equal(np.asarray(image), np.asarray(local(pipe, start.resize((128, 64), Image.LANCZOS))))


GOOD = base64.b64encode(png(gradient(64, 64))).decode("ascii")


@pytest.mark.parametrize("change, words", [
    ({"init_images": None}, "init_images: img2img needs a list"),
    ({"init_images": []}, "init_images: img2img needs a list"),
    ({"init_images": [base64.b64encode(b"not a picture at all").decode()]}, "init_images[0] is not a picture"),
    ({"init_images": ["@@not base64@@"]}, "init_images[0] is not valid base64"),
    ({"init_images": [GOOD[: len(GOOD) // 2 // 4 * 4]]}, "init_images[0] is not a picture"),  # truncated PNG
    ({"denoising_strength": 0}, "denoising_strength must be a number greater than 0 and at most 1"),
    ({"denoising_strength": 1.5}, "denoising_strength must be"),
    ({"denoising_strength": "strong"}, "denoising_strength must be"),
    ({"steps": 1, "denoising_strength": 0.5}, "denoising_strength: strength 0.5 with 1 steps runs no"),
    ({"resize_mode": 2}, "resize_mode: frame paints 0 (just resize), 1 (crop and resize), got 2"),
    ({"sampler_name": "Heun"}, "unknown sampler 'Heun'"),
])
def test_bad_img2img_fields_are_422_naming_the_field(served, change, words):
    body = {"prompt": "x", "steps": 2, "width": 64, "height": 64, "init_images": [GOOD], **change}
    answer = requests.post(served.url + "/sdapi/v1/img2img", json=body, headers=AUTH, timeout=30)
    assert answer.status_code == 422 and words in answer.json()["detail"], answer.text


def test_img2img_needs_the_token(served):
    answer = requests.post(served.url + "/sdapi/v1/img2img", json={"init_images": [GOOD]}, timeout=30)
    assert answer.status_code == 401


def test_a_model_without_vae_encoder_is_refused_with_the_reason_and_the_frame_falls_back(tmp_path, start_picture):
    model = tmp_path / "no-encoder"
    shutil.copytree(resolve_model_source("demo"), model, ignore=shutil.ignore_patterns("vae_encoder"))
    server = start_server(str(model), "frame", Config(), TOKEN, "127.0.0.1:0")
    try:
        answer = requests.post(server.url + "/sdapi/v1/img2img", json={"prompt": "x", "init_images": [GOOD]},
                               headers=AUTH, timeout=30)
        with pytest.raises(RemoteUnavailable) as info:
            through(server, dataclasses.replace(JOB, init_image=png(start_picture)))
    finally:
        server.close()
    assert answer.status_code == 422
    assert "init_images: this server's model cannot start from a picture" in answer.json()["detail"]
    assert "no vae_encoder/model.onnx, which image-to-image needs" in answer.json()["detail"]
    assert info.value.reason == "rejected" and "vae_encoder" in str(info.value)


def test_img2img_waits_in_the_same_queue_and_progress_names_it(served, start_picture):
    seen = {}
    real_generate = served.pipe.generate

    def watching_generate(*args, callback=None, **kwargs):
        def relay(report):
            callback(report)
            if report.phase == "unet" and "progress" not in seen:
                seen["progress"] = served.jobs.progress(with_image=False)
        seen["args"], seen["kwargs"] = args, kwargs
        return real_generate(*args, callback=relay, **kwargs)

    served.pipe.generate = watching_generate
    try:
        through(served, dataclasses.replace(JOB, init_image=png(start_picture)))
    finally:
        del served.pipe.generate
    assert seen["args"][0].strength == 0.5 and seen["kwargs"]["init_image"].size == (128, 64)
    state = seen["progress"]["state"]
    assert state["job"] == "img2img" and state["job_count"] == 1 and state["sampling_steps"] == 2  # int(4 * 0.5)
    assert threading.current_thread() is threading.main_thread()


@pytest.mark.skipif(not onnxruntime_installed(), reason="onnxruntime (frame[desktop]) is not installed")
def test_onnxruntime_engine_img2img_matches_within_rounding_with_the_seeded_encoder(pipe, start_picture):
    server = start_server(resolve_model_source("demo"), "auto", Config(), TOKEN, "127.0.0.1:0")
    job = dataclasses.replace(JOB, init_image=png(start_picture))
    try:
        assert server.engine == "onnxruntime"
        result = through(server, job)
    finally:
        server.close()
    # the demo encoder draws its own posterior noise: it runs on frame's engine with the seeded draw
    # (84 dB, at most 1/255 apart here); onnxruntime's own draw, which the seed does not reach, gave 20.5 dB
    diff = np.asarray(result.image).astype(float) - np.asarray(local(pipe, start_picture)).astype(float)
    psnr = 10 * np.log10(255.0**2 / max(np.mean(diff**2), 1e-12))
    assert psnr > 40, psnr
