"""The ComfyUI client against the ComfyUI test server on 127.0.0.1: the success path (txt2img, img2img,
an owner's workflow) and every fault, each ending in RemoteUnavailable with the reason the fallback
reports — the same reasons as the AUTOMATIC1111 client's."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
import time

import pytest
from PIL import Image

from frame.remote import RemoteJob, RemoteUnavailable, check_comfyui, render_comfyui
from frame.remote.render import RemoteProgress
from tests.ports import free_port
from tests.remote import clients
from tests.remote.clients import JOB, settings
from tests.remote.fake_comfyui import CHECKPOINTS, FakeComfyUI


def failure(url: str, deadline: float | None = None, job: RemoteJob = JOB, **changes) -> RemoteUnavailable:
    return clients.failure(render_comfyui, url, deadline, job, **changes)


def test_success_stores_the_picture_with_the_parameters_sent():
    reports: list[RemoteProgress] = []
    with FakeComfyUI(job_seconds=0.5) as fake:
        result = render_comfyui(settings(fake.url), JOB, progress=reports.append)
        [post] = fake.posts("/prompt")
    assert result.image.size == (128, 80) and result.image.mode == "RGB" and result.server == fake.url
    params = result.parameters
    assert (params.prompt, params.negative_prompt, params.steps, params.guidance, params.seed, params.sampler,
            params.model) == (JOB.prompt, "blurry", 25, 7.0, 42, "dpm++2m_karras", CHECKPOINTS[0])
    assert result.image.info["parameters"].startswith(
        f"{JOB.prompt}\nNegative prompt: blurry\nSteps: 25, Sampler: DPM++ 2M Karras, CFG scale: 7, Seed: 42, "
        f"Size: 128x80, Model: {CHECKPOINTS[0]}, Version: frame ")
    sampler = post["prompt"]["3"]["inputs"]
    assert (sampler["sampler_name"], sampler["scheduler"], sampler["seed"]) == ("dpmpp_2m", "karras", 42)
    assert post["client_id"] and post["prompt"]["4"]["inputs"]["ckpt_name"] == CHECKPOINTS[0]
    assert reports and all(r.phase == "remote" and r.steps == 25 for r in reports)
    steps = [r.step for r in reports]  # from ComfyUI's /ws progress events, while /history is polled
    assert steps == sorted(steps) and steps[-1] > 0 and any(r.step_done for r in reports)
    assert [r for r in reports if r.step][-1].preview(scale=2).size == (16, 10)  # its PREVIEW_IMAGE frames
    paths = [path for _, path, _, _ in fake.requests if path != "/ws"]
    assert paths[:2] == ["/object_info/CheckpointLoaderSimple", "/prompt"] and paths[-1] == "/view"
    assert any(path.startswith("/history/") for path in paths)


def test_img2img_uploads_the_picture_and_paints_over_it():
    init = io.BytesIO()
    Image.new("RGB", (128, 80), (10, 20, 30)).save(init, format="PNG")
    job = dataclasses.replace(JOB, init_image=init.getvalue(), denoising_strength=0.4)
    with FakeComfyUI(job_seconds=0.1) as fake:
        result = render_comfyui(settings(fake.url), job)
        [post] = fake.posts("/prompt")
        uploaded = [data for (kind, _), data in fake.files.items() if kind == "input"]
    assert fake.posts("/upload/image") == [["image", "overwrite", "type"]] and uploaded == [init.getvalue()]
    assert post["prompt"]["3"]["inputs"]["denoise"] == 0.4 and post["prompt"]["10"]["inputs"]["image"].endswith(".png")
    assert result.image.size == (128, 80) and result.parameters.denoising_strength == 0.4


@pytest.mark.parametrize("size, mode", [((200, 90), "RGB"), ((128, 80), "RGBA")])
def test_img2img_sends_the_picture_at_the_jobs_size(size, mode):
    """ComfyUI paints at the size LoadImage reads: a picture of another size (or with transparency) is
    fitted as frame's own image-to-image does before it is uploaded, and the night's picture has the
    size asked for (it came back 200x90 and was refused as the wrong size)."""
    init = io.BytesIO()
    Image.new(mode, size, (200, 30, 30, 128)[:len(mode)]).save(init, format="PNG")
    job = dataclasses.replace(JOB, init_image=init.getvalue(), denoising_strength=0.4)
    with FakeComfyUI(job_seconds=0.1) as fake:
        result = render_comfyui(settings(fake.url), job)
        [uploaded] = [data for (kind, _), data in fake.files.items() if kind == "input"]
    sent = Image.open(io.BytesIO(uploaded))
    assert (sent.size, sent.mode) == ((128, 80), "RGB") and result.image.size == (128, 80)
    if mode == "RGBA":  # transparency on white paper, as frame.diffusion.img2img does
        assert sent.getpixel((0, 0)) == (227, 142, 142)


def test_an_owners_workflow_gets_its_placeholders_filled(tmp_path):
    workflow = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CHECKPOINTS[1]}},
        "2": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}}, woodcut print", "clip": ["1", 1]}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{negative}}", "clip": ["1", 1]}},
        "4": {"class_type": "EmptyLatentImage", "inputs": {"width": "{{width}}", "height": "{{height}}",
                                                           "batch_size": 1}},
        "5": {"class_type": "KSampler", "inputs": {"seed": "{{seed}}", "steps": 6, "cfg": 1.5, "sampler_name": "lcm",
                                                   "scheduler": "sgm_uniform", "denoise": 1, "model": ["1", 0],
                                                   "positive": ["2", 0], "negative": ["3", 0],
                                                   "latent_image": ["4", 0]}},
        "6": {"class_type": "VAEDecode", "inputs": {"samples": ["5", 0], "vae": ["1", 2]}},
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "x"}}}
    path = tmp_path / "woodcut_api.json"
    path.write_text(json.dumps(workflow))
    with FakeComfyUI(job_seconds=0.1) as fake:
        result = render_comfyui(settings(fake.url, workflow=str(path)), JOB)
        [post] = fake.posts("/prompt")
    assert post["prompt"]["2"]["inputs"]["text"] == f"{JOB.prompt}, woodcut print"
    assert post["prompt"]["5"]["inputs"]["seed"] == 42 and post["prompt"]["4"]["inputs"]["width"] == 128
    params = result.parameters
    assert (params.steps, params.guidance, params.sampler, params.model) == (6, 1.5, "lcm", CHECKPOINTS[1])


@pytest.mark.parametrize("auth, header", [
    ({"user": "anna", "password": "s3cret-pass"}, "Basic " + base64.b64encode(b"anna:s3cret-pass").decode()),
    ({"token": "tok-1234567890"}, "Bearer tok-1234567890"),
])
def test_credentials_are_sent_on_every_request(auth, header):
    with FakeComfyUI(job_seconds=0.1, **auth) as fake:
        render_comfyui(settings(fake.url, **auth), JOB)
    assert {h.get("Authorization") for _, _, h, _ in fake.requests} == {header}


def test_wrong_credentials_send_no_job():
    with FakeComfyUI(token="right") as fake:
        error = failure(fake.url, token="wrong")
    assert error.reason == "auth" and len(fake.requests) == 1


def test_a_checkpoint_comfyui_does_not_have_is_rejected_with_its_reasons():
    with FakeComfyUI() as fake:
        error = failure(fake.url, checkpoint="nonexistent.safetensors")
    assert error.reason == "rejected"
    # ComfyUI's reason is in node_errors only (error.details lists the output nodes' own reasons)
    assert "HTTP 400 to /prompt: Prompt outputs failed validation: CheckpointLoaderSimple (node 4): Value not in " \
           "list: ckpt_name: 'nonexistent.safetensors' not in" in str(error)


def test_a_broken_workflow_file_never_reaches_the_server(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps({"nodes": [], "links": []}))
    with FakeComfyUI() as fake:
        error = failure(fake.url, workflow=str(tmp_path / "w.json"))
    assert error.reason == "rejected" and "render.remote.workflow:" in str(error) and "Export (API)" in str(error)
    assert fake.requests == []


def test_refused():
    started = time.monotonic()
    error = failure(f"http://127.0.0.1:{free_port()}")
    assert error.reason == "refused" and "not reachable (Connection refused)" in str(error)
    assert time.monotonic() - started < 2


def test_a_slow_job_is_given_up_at_the_deadline_and_interrupted_on_the_server(caplog):
    caplog.set_level(logging.INFO, "frame.remote.comfy_render")
    with FakeComfyUI(job_seconds=20.0) as fake:
        started = time.monotonic()
        error = failure(fake.url, deadline=1.5)
        assert fake.interrupted.wait(2)
        [interrupt] = fake.posts("/interrupt")
        [post] = fake.posts("/prompt")
    assert error.reason == "timeout" and "not done within 1.5 s (the render window)" in str(error)
    assert time.monotonic() - started < 4
    assert interrupt == {"prompt_id": fake.prompt_ids[0]} and post["client_id"]
    # ComfyUI answers /interrupt with an empty HTTP 200: that is success, not "could not cancel (bad-response)"
    assert f"cancelled the job on {fake.url}" in caplog.text and "could not cancel" not in caplog.text


def test_a_job_still_waiting_in_comfyuis_queue_is_deleted_not_interrupted(caplog):
    """Someone else's job runs: frame's own, still pending, is taken out of the queue, theirs goes on."""
    caplog.set_level(logging.INFO, "frame.remote.comfy_render")
    with FakeComfyUI(job_seconds=20.0) as fake:
        fake.queue.append((-1, "someone-else", {}, {}, []))  # runs first
        time.sleep(0.3)
        error = failure(fake.url, deadline=1.0)
        deletes = fake.posts("/queue")
        running = fake.running
    assert error.reason == "timeout" and fake.posts("/interrupt") == []
    assert deletes == [{"delete": fake.prompt_ids}] and running[1] == "someone-else"
    assert "cancelled the job" in caplog.text and "could not cancel" not in caplog.text  # an empty 200 is success


def test_a_dripping_picture_is_cut_at_the_job_deadline():
    with FakeComfyUI(mode="slow-view", job_seconds=0.1, drip_seconds=0.2) as fake:
        started = time.monotonic()
        error = failure(fake.url, deadline=1.5)
    assert error.reason == "timeout" and 1.3 < time.monotonic() - started < 3.0


FAULTS = [  # (mode, reason, words)
    ("error", "server-error", "the workflow failed on the server: KSampler (node 3): torch.OutOfMemoryError: "
                              "CUDA out of memory"),
    ("truncated-png", "bad-image", "the PNG is truncated"),
    ("wrong-size", "wrong-size", "the picture is 64x80, 128x80 was asked for"),
    ("huge", "wrong-size", "the picture is 10000x10000, 128x80 was asked for"),
    ("not-json", "bad-response", "the answer to /history/"),
    ("die", "died", "the server stopped mid-job (connection refused)"),
    ("vanish", "died", "the server is gone"),
    ("restart", "died", "the server no longer knows the job (was ComfyUI restarted?)"),
    # issue 40 item 11: RecursionError's traceback before; the worker at 359 MiB for a 60 MB answer
    ("deep-history", "bad-response", "the answer to /history/"),
    ("bloated-history", "bad-response", "it holds more than 100,000 values"),
    ("huge-history", "bad-response", "the answer is larger than 24 MB"),
]


@pytest.mark.parametrize("mode, reason, words", FAULTS, ids=[f[0] for f in FAULTS])
def test_faults_end_in_the_fallback_error_with_their_reason(mode, reason, words):
    with FakeComfyUI(mode=mode, job_seconds=0.3) as fake:
        started = time.monotonic()
        error = failure(fake.url, deadline=20)
    assert (error.reason, time.monotonic() - started < 5) == (reason, True)
    assert words in str(error) and str(error).startswith(f"render server {fake.url}: ")


def test_not_a_comfyui_server():
    with FakeComfyUI() as fake:
        error = failure(fake.url + "/somewhere")
    assert error.reason == "rejected" and "is it a ComfyUI server" in str(error)


def test_config_check_lists_the_checkpoints():
    with FakeComfyUI() as fake:
        assert check_comfyui(settings(fake.url)) == CHECKPOINTS


def test_without_a_websocket_the_job_is_still_followed_by_polling(monkeypatch):
    """A proxy that refuses websocket upgrades costs the phone page its step count, not the picture."""
    reports: list[RemoteProgress] = []
    with FakeComfyUI(job_seconds=0.5) as fake:
        monkeypatch.setattr(fake, "websocket", lambda handler, client_id: fake.send(handler, 404, b"", "text/plain"))
        result = render_comfyui(settings(fake.url), JOB, progress=reports.append)
    assert result.image.size == (128, 80) and reports and {r.step for r in reports} == {0}


@pytest.mark.parametrize("mode, most_mb", [("bloated-history", 90), ("huge-history", 8), ("deep-history", 8)])
def test_a_hostile_history_answer_is_refused_within_the_pi_workers_memory(mode, most_mb):
    import tracemalloc

    from tests.remote.fake_comfyui import hostile_history

    hostile_history(mode)  # made before counting: the server's bytes are not the client's
    with FakeComfyUI(mode=mode, job_seconds=0.1) as fake:
        tracemalloc.start()
        try:
            error = failure(fake.url, deadline=20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert error.reason == "bad-response"
    assert peak < most_mb << 20, f"{peak / 2**20:.0f} MiB traced while refusing a {mode} answer"
