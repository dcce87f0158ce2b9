"""``frame serve-render`` frame-to-frame on 127.0.0.1: the remote client against frame's own server on
the bundled demo model, bit-identical to a local render; auth, validation and the one-at-a-time queue."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest
import requests
from PIL import Image

from frame.cli.serve_render import RenderServer, start_server
from frame.config.schema import Config, RemoteRenderConfig
from frame.diffusion import load_pipeline
from frame.models import resolve_model_source
from frame.remote import RemoteJob, RemoteUnavailable, render_remote
from frame.serve.render.engines import onnxruntime_installed
from tests.painting import paint

TOKEN = "serve-token-for-tests"
JOB = RemoteJob(prompt="a quiet harbour at dawn, watercolor painting", negative_prompt="blurry", steps=2,
                guidance=7.5, sampler="euler_a", seed=1234, width=128, height=64)


def remote(url: str, **changes) -> RemoteRenderConfig:
    base = dict(url=url, token=TOKEN, connect_timeout_seconds=2.0, poll_seconds=0.05, lost_after_seconds=10.0)
    return dataclasses.replace(RemoteRenderConfig(), **{**base, **changes})


def run_clients(server: RenderServer, *clients, stagger: float = 0.05) -> None:
    """Run ``clients`` (callables) in helper threads while this (main) thread runs the server's jobs, as
    ``frame serve-render`` does."""
    threads = [threading.Thread(target=client) for client in clients]

    def start():
        for thread in threads:
            thread.start()
            time.sleep(stagger)

    starter = threading.Thread(target=start)
    starter.start()
    while starter.is_alive() or any(thread.is_alive() for thread in threads):
        server.jobs.run_next(timeout=0.02)


def through(server: RenderServer, job: RemoteJob = JOB, **changes):
    """``render_remote`` against ``server``: the result, or the RemoteUnavailable it raised."""
    out = {}

    def client():
        try:
            out["result"] = render_remote(remote(server.url, **changes), job)
        except RemoteUnavailable as exc:
            out["result"] = exc

    run_clients(server, client)
    if isinstance(out["result"], RemoteUnavailable):
        raise out["result"]
    return out["result"]


@pytest.fixture(scope="module")
def local_picture():
    return paint(load_pipeline(resolve_model_source("demo")),
        JOB.prompt, negative_prompt=JOB.negative_prompt, steps=JOB.steps, guidance=JOB.guidance,
        sampler=JOB.sampler, seed=JOB.seed, width=JOB.width, height=JOB.height)


@pytest.fixture(scope="module")
def served():
    server = start_server(resolve_model_source("demo"), "frame", Config(), TOKEN, "127.0.0.1:0", max_waiting=2)
    yield server
    server.close()


def test_frame_to_frame_is_bit_identical_to_a_local_render(served, local_picture):
    result = through(served)
    local = local_picture
    assert np.array_equal(np.asarray(result.image), np.asarray(local))
    assert result.image.info["parameters"] == local.info["parameters"]
    params = result.parameters
    assert (params.prompt, params.negative_prompt, params.steps, params.sampler, params.guidance, params.seed,
            params.width, params.height, params.model) == (
        JOB.prompt, "blurry", 2, "euler_a", 7.5, 1234, 128, 64, "demo")
    assert served.engine == "frame"


def test_token_is_required_bearer_or_basic(served):
    assert requests.get(served.url + "/sdapi/v1/sd-models", timeout=5).status_code == 401
    bearer = requests.get(served.url + "/sdapi/v1/sd-models", headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=5)
    assert bearer.status_code == 200 and bearer.json()[0]["title"] == "demo"
    basic = requests.get(served.url + "/sdapi/v1/progress", auth=("any-user", TOKEN), timeout=5)
    assert basic.status_code == 200 and basic.json()["state"]["job_count"] == 0
    with pytest.raises(RemoteUnavailable) as info:
        through(served, token="wrong-token-123")
    assert info.value.reason == "auth"


@pytest.mark.parametrize("change, words", [
    ({"sampler_name": "Heun"}, "unknown sampler 'Heun'"),
    ({"batch_size": 2}, "batch_size must be 1"),
    ({"width": 100}, "multiples of"),
    ({"steps": 1000}, "steps must be from 1 to 150"),
])
def test_bad_requests_are_422_with_the_reason(served, change, words):
    body = {"prompt": "x", "steps": 2, "width": 64, "height": 64, **change}
    answer = requests.post(served.url + "/sdapi/v1/txt2img", json=body, headers={"Authorization": f"Bearer {TOKEN}"},
                           timeout=30)
    assert answer.status_code == 422 and words in answer.json()["detail"]


def test_an_undecodable_init_image_is_rejected_and_the_client_falls_back(served):
    job = dataclasses.replace(JOB, init_image=b"\x89PNG...")  # img2img itself: test_serve_img2img.py
    with pytest.raises(RemoteUnavailable) as info:
        through(served, job)
    assert info.value.reason == "rejected" and "init_images[0] is not a picture" in str(info.value)


class SlowPipe:
    """Stands in for the pipeline in the queue test: each job reports two steps and, after the first,
    waits for ``gate`` — so the test sees a job running and one waiting however loaded the machine is."""

    def __init__(self):
        self.real = load_pipeline(resolve_model_source("demo"))
        self.real.settings("warm-up")  # reads the UNet's structure once, before the timed part
        self.spans: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()

    def __getattr__(self, name):
        return getattr(self.real, name)

    def generate(self, settings, callback=None, **kwargs):
        from frame.diffusion.progress import Progress

        started = time.monotonic()
        for step in range(2):
            time.sleep(0.05)
            callback(Progress("unet", step + 1, 2, 0.0, (step + 1) / 2, 0.1, True, None, None))
            self.gate.wait(30)
        image = Image.new("RGB", (settings.width, settings.height), (9, 9, 9))
        image.info["parameters"] = "p"
        with self.lock:
            self.spans.append((started, time.monotonic()))
        return image


def test_jobs_run_one_at_a_time_and_progress_reports_the_running_one():
    pipe = SlowPipe()
    server = RenderServer(pipe, "frame", "demo", TOKEN, "127.0.0.1:0", max_waiting=1)
    results, errors, running = [], [], {}

    def one(seed):
        try:
            results.append(render_remote(remote(server.url), dataclasses.replace(JOB, seed=seed, steps=1)))
        except RemoteUnavailable as exc:
            errors.append(exc)

    def watch():
        """Read the progress once the first job has made a step and another waits; then let them finish
        (after the third client was turned away, or a deadline that the assertions below then report)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            running.update(requests.get(server.url + "/sdapi/v1/progress",
                                        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).json())
            if running["state"]["queued"] == 1 and running["progress"] > 0 and errors:
                break
            time.sleep(0.02)
        pipe.gate.set()

    try:
        run_clients(server, watch, *[lambda seed=seed: one(seed) for seed in (1, 2, 3)], stagger=0.15)
    finally:
        server.close()
    assert len(results) == 2 and len(errors) == 1, errors  # one ran, one waited, the third found the queue full
    assert errors[0].reason == "server-error" and "HTTP 503" in str(errors[0])
    (a_start, a_end), (b_start, b_end) = sorted(pipe.spans)
    assert a_end <= b_start  # never two at once
    assert running["state"]["job_count"] == 1 and running["state"]["queued"] == 1
    assert running["state"]["sampling_steps"] == 2 and 0 < running["progress"] <= 1


@pytest.mark.skipif(not onnxruntime_installed(), reason="onnxruntime (frame[desktop]) is not installed")
def test_onnxruntime_engine_paints_the_same_picture_within_rounding(local_picture):
    server = start_server(resolve_model_source("demo"), "auto", Config(), TOKEN, "127.0.0.1:0")
    try:
        assert server.engine == "onnxruntime"
        result = through(server)
    finally:
        server.close()
    diff = np.asarray(result.image).astype(float) - np.asarray(local_picture).astype(float)
    psnr = 10 * np.log10(255.0**2 / max(np.mean(diff**2), 1e-12))
    assert psnr > 40, psnr


def test_override_settings_randn_source_picks_the_noise_source(served):
    """An A1111 client asking for ``randn_source: CPU`` gets torch's CPU noise (and ``RNG: CPU`` in the
    answer's infotext), the picture a local ``noise="torch-cpu"`` render paints."""
    import base64
    import io

    body = {"prompt": JOB.prompt, "negative_prompt": "blurry", "steps": 2, "cfg_scale": 7.5, "sampler_name": "Euler a",
            "seed": 1234, "width": 128, "height": 64, "override_settings": {"randn_source": "CPU"}}
    out = {}

    def client():
        out["answer"] = requests.post(served.url + "/sdapi/v1/txt2img", json=body, timeout=60,
                                      headers={"Authorization": f"Bearer {TOKEN}"})

    run_clients(served, client)
    answer = out["answer"].json()
    picture = Image.open(io.BytesIO(base64.b64decode(answer["images"][0])))
    local = paint(load_pipeline(resolve_model_source("demo")),
        JOB.prompt, negative_prompt="blurry", steps=2, guidance=7.5, sampler="euler_a", seed=1234, width=128,
        height=64, noise="torch-cpu")
    assert np.array_equal(np.asarray(picture.convert("RGB")), np.asarray(local))
    assert "RNG: CPU" in answer["info"] and "RNG: CPU" in picture.info["parameters"]
