"""The remote render client against a fake AUTOMATIC1111 server on 127.0.0.1: the success path and
every fault, each ending in RemoteUnavailable with the reason the fallback reports."""

from __future__ import annotations

import base64
import dataclasses
import io
import logging
import time

import pytest
from PIL import Image

from frame.remote import RemoteJob, RemoteUnavailable, render_remote
from frame.remote.render import RemoteProgress
from tests.ports import free_port
from tests.remote import clients
from tests.remote.clients import JOB, settings
from tests.remote.fake_a1111 import FakeA1111


def failure(url: str, deadline: float | None = None, job: RemoteJob = JOB, **changes) -> RemoteUnavailable:
    return clients.failure(render_remote, url, deadline, job, **changes)


def test_success_returns_the_picture_and_the_servers_parameters():
    reports: list[RemoteProgress] = []
    with FakeA1111(job_seconds=0.5) as fake:
        result = render_remote(settings(fake.url), JOB, progress=reports.append)
    assert result.image.size == (128, 80) and result.image.mode == "RGB"
    params = result.parameters
    assert (params.prompt, params.negative_prompt, params.steps, params.guidance, params.seed) == (
        JOB.prompt, "blurry", 25, 7.0, 42)
    assert params.sampler == "dpm++2m_karras"  # "DPM++ 2M" + "Schedule type: Karras" in the infotext
    assert params.model == "dreamshaper_8" and (params.width, params.height) == (128, 80)
    assert result.image.info["parameters"].startswith(JOB.prompt + "\nNegative prompt: blurry\nSteps: 25")
    assert result.server == fake.url
    method, path, _, body = fake.requests[1]
    assert (method, path) == ("POST", "/sdapi/v1/txt2img")
    assert {k: body[k] for k in ("prompt", "negative_prompt", "steps", "sampler_name", "cfg_scale", "seed",
                                 "width", "height")} == {
        "prompt": JOB.prompt, "negative_prompt": "blurry", "steps": 25, "sampler_name": "DPM++ 2M Karras",
        "cfg_scale": 7.0, "seed": 42, "width": 128, "height": 80}
    assert reports and all(r.phase == "remote" and r.steps == 25 for r in reports)
    assert reports[0].step_done and reports[0].preview(scale=2).size == (16, 10)
    assert [r.fraction for r in reports] == sorted(r.fraction for r in reports)


def test_img2img_sends_the_init_image_and_strength():
    init = io.BytesIO()
    Image.new("RGB", (128, 80), (10, 20, 30)).save(init, format="PNG")
    job = dataclasses.replace(JOB, init_image=init.getvalue(), denoising_strength=0.4)
    with FakeA1111(job_seconds=0.1) as fake:
        result = render_remote(settings(fake.url), job)
    _, path, _, body = fake.requests[1]
    assert path == "/sdapi/v1/img2img" and body["denoising_strength"] == 0.4
    assert base64.b64decode(body["init_images"][0]) == init.getvalue()
    assert result.image.size == (128, 80)


@pytest.mark.parametrize("auth, header", [
    ({"user": "anna", "password": "s3cret-pass"}, "Basic " + base64.b64encode(b"anna:s3cret-pass").decode()),
    ({"token": "tok-1234567890"}, "Bearer tok-1234567890"),
])
def test_credentials_are_sent(auth, header):
    with FakeA1111(job_seconds=0.1, **auth) as fake:
        render_remote(settings(fake.url, **auth), JOB)
    assert {h.get("Authorization") for _, _, h, _ in fake.requests} == {header}


def test_refused():
    started = time.monotonic()
    error = failure(f"http://127.0.0.1:{free_port()}")
    assert error.reason == "refused" and "not reachable (Connection refused)" in str(error)
    assert time.monotonic() - started < 2


def test_unknown_host_counts_as_refused():
    error = failure("http://frame-render.invalid:7860")
    assert error.reason == "refused"


@pytest.mark.parametrize("mode", ["slow-headers", "slow-body"])
def test_a_dripping_server_is_cut_at_the_job_deadline(mode):
    with FakeA1111(mode=mode, job_seconds=0.1, drip_seconds=0.2) as fake:
        started = time.monotonic()
        error = failure(fake.url, deadline=1.5)
        elapsed = time.monotonic() - started
    assert error.reason == "timeout" and "within 1.5 s" in str(error)
    assert 1.3 < elapsed < 3.0


def test_job_timeout_minutes_bounds_a_job_without_a_caller_deadline():
    with FakeA1111(job_seconds=5.0) as fake:
        started = time.monotonic()
        error = failure(fake.url, job_timeout_minutes=1.0 / 60)
    assert error.reason == "timeout" and time.monotonic() - started < 2.5


def _interrupts(fake) -> int:
    return sum(1 for method, path, _, _ in fake.requests if (method, path) == ("POST", "/sdapi/v1/interrupt"))


def test_a_job_given_up_at_frames_deadline_is_interrupted_on_the_server():
    """The server would paint on for nobody; A1111's interrupt frees it (and its queue) at once."""
    with FakeA1111(job_seconds=20.0) as fake:
        started = time.monotonic()
        error = failure(fake.url, deadline=1.0)
        assert error.reason == "timeout" and _interrupts(fake) == 1
        assert fake.interrupted.wait(2)
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("mode", ["die", "vanish", "500"])
def test_a_lost_or_failed_server_is_not_sent_an_interrupt(mode):
    """A1111 interrupts whatever it paints: only frame's own running job may be interrupted."""
    with FakeA1111(mode=mode, job_seconds=0.2) as fake:
        failure(fake.url, deadline=20, lost_after_seconds=1.0)
    assert _interrupts(fake) == 0


@pytest.mark.parametrize("mode, reason, words", [
    ("500", "server-error", "server error HTTP 500 on /sdapi/v1/txt2img: CUDA out of memory"),
    ("422", "rejected", "HTTP 422 to /sdapi/v1/txt2img: sampler_name: unknown sampler"),
    ("truncated-png", "bad-image", "the PNG is truncated"),
    ("wrong-size", "wrong-size", "the picture is 64x80, 128x80 was asked for"),
    ("not-json", "bad-response", "the answer to /sdapi/v1/txt2img is not JSON"),
    ("die", "died", "the server stopped or crashed mid-job"),
])
def test_faults_end_in_the_fallback_error_with_their_reason(mode, reason, words):
    with FakeA1111(mode=mode, job_seconds=0.3) as fake:
        error = failure(fake.url)
    assert error.reason == reason
    assert words in str(error)
    assert str(error).startswith(f"render server {fake.url}: ")


def test_a_server_that_stops_answering_mid_job_is_given_up_after_lost_after_seconds():
    with FakeA1111(mode="vanish", job_seconds=0.2) as fake:
        started = time.monotonic()
        error = failure(fake.url, deadline=20, lost_after_seconds=1.0)
        elapsed = time.monotonic() - started
    assert error.reason == "died" and "the server is gone" in str(error)
    assert elapsed < 4


def test_wrong_credentials():
    with FakeA1111(user="anna", password="right") as fake:
        error = failure(fake.url, user="anna", password="wrong")
    assert error.reason == "auth" and "HTTP 401" in str(error)
    assert len(fake.requests) == 1  # the check before the job: no job was sent


def test_not_an_a1111_server():
    with FakeA1111() as fake:
        error = failure(fake.url + "/somewhere")
    assert error.reason == "rejected" and "started with --api?" in str(error)


def test_empty_url_is_not_configured():
    error = failure("")
    assert error.reason == "not-configured"


def test_credentials_never_appear_in_errors_or_logs(caplog):
    caplog.set_level(logging.DEBUG)
    secrets = ("hunter2-url", "pa55-field", "tok-secret-99")
    with FakeA1111(mode="500", user="anna", password="pa55-field") as fake:
        url = fake.url.replace("http://", "http://bob:hunter2-url@")
        errors = [failure(url, user="anna", password="pa55-field"),
                  failure(url, token="tok-secret-99"),
                  failure(f"http://bob:hunter2-url@127.0.0.1:{free_port()}/")]
    shown = " ".join(str(e) for e in errors) + caplog.text
    assert "***@127.0.0.1" in shown
    assert not [s for s in secrets if s in shown]
