"""``render.backend: comfyui`` wired into the night: the real render worker (and the real daemon)
against the ComfyUI test server on 127.0.0.1 — the server's picture stored with its parameters, a
restarted worker asking again with the same workflow, and a server that dies mid-night falling back to
the frame's own pipeline. The fault table shared with the AUTOMATIC1111 backend is in
``test_remote_night.py`` (``COMFYUI_FAULTS``)."""

from __future__ import annotations

from PIL import Image

from frame.daemon.jobs import night
from frame.daemon.store import gallery
from tests.remote.fake_comfyui import CHECKPOINTS, FakeComfyUI
from tests.remote.nights import FAST, KillDuring, render_queued, restart_daemon, stop_while_on_the_server


def test_the_night_is_painted_on_comfyui_with_its_parameters(open_night):
    with FakeComfyUI(job_seconds=1.0) as fake:
        ctx = open_night(fake.url, "comfyui")
        _, outcome, picture_id = render_queued(ctx)
        [post] = fake.posts("/prompt")
    assert outcome.status == "done", outcome.error
    picture = ctx.store.picture(picture_id)
    sampler = post["prompt"]["3"]["inputs"]
    assert post["prompt"]["6"]["inputs"]["text"] == picture.prompt == "a lighthouse in a storm"
    assert (sampler["seed"], sampler["steps"], sampler["sampler_name"], sampler["scheduler"]) == (
        picture.seed, 25, "dpmpp_2m", "karras")
    assert (picture.model, picture.steps, picture.sampler, picture.width, picture.height) == (
        CHECKPOINTS[0], 25, "dpm++2m_karras", 96, 64)
    parameters = Image.open(gallery.picture_path(ctx.state_dir, picture.file)).info["parameters"]
    assert parameters.startswith(f"a lighthouse in a storm\nNegative prompt: {post['prompt']['7']['inputs']['text']}"
                                 f"\nSteps: 25, Sampler: DPM++ 2M Karras, CFG scale: 7, Seed: {picture.seed}, "
                                 f"Size: 96x64, Model: {CHECKPOINTS[0]}")
    assert picture.why["painted"] == f"on the render server {fake.url} ({CHECKPOINTS[0]})"
    assert "remote_fallback" not in picture.why
    assert Image.open(gallery.picture_path(ctx.state_dir, picture.panel_file)).size == (80, 48)


def test_a_worker_killed_mid_job_asks_comfyui_again_with_the_same_workflow(open_night):
    with FakeComfyUI(job_seconds=30.0) as fake:  # the first job outlasts the kill; the one asked again is quick
        ctx = open_night(fake.url, "comfyui")
        ctx.status.add_listener(KillDuring(ctx, 1, after_last=lambda: setattr(fake, "job_seconds", 0.3)))
        _, outcome, picture_id = render_queued(ctx)
        first, again = fake.posts("/prompt")
    assert outcome.status == "done" and outcome.restarts == 1, outcome.error
    assert first["prompt"] == again["prompt"]  # the same prompt and seed: the same picture
    assert ctx.store.count_pictures() == 1 and ctx.store.picture(picture_id).model == CHECKPOINTS[0]


def _daemon_night(tmp_path, fake: FakeComfyUI, watch_progress: bool = False) -> tuple[dict, dict]:
    """``frame run`` with render.backend: comfyui; "render now", then the stored picture and (with
    ``watch_progress``) the first live status showing a step of the server's and its preview."""
    from tests.daemon.daemonproc import DaemonProcess, write_config

    config, url = write_config(tmp_path, display={"size": "80x48"},
                               render={"backend": "comfyui", "remote": {"url": fake.url, **FAST}})
    daemon = DaemonProcess(config, url)
    render: dict = {}
    try:
        daemon.post("/api/render")
        if watch_progress:
            render = daemon.wait_for(lambda: (lambda r: r if r.get("preview") and r.get("step") else None)(
                daemon.get("/api/status").json().get("render") or {}), timeout=60)
        daemon.wait_for(lambda: daemon.get("/api/pictures").json()["total"] == 1, timeout=120)
        return daemon.get("/api/pictures/1").json(), render
    finally:
        daemon.terminate()
        daemon.kill()


def test_a_daemon_night_on_comfyui_relays_progress_and_stores_the_picture_with_its_parameters(tmp_path):
    with FakeComfyUI(job_seconds=4.0) as fake:
        picture, render = _daemon_night(tmp_path, fake, watch_progress=True)
        [post] = fake.posts("/prompt")
    assert render["stage"] == "generating (remote)" and render["steps"] == 25 and 0 < render["step"] <= 25
    assert render["backend_note"] == f"Painting on the render server {fake.url}."
    assert post["prompt"]["6"]["inputs"]["text"] == picture["prompt"]  # the taste model's pick
    assert (picture["model"], picture["steps"], picture["seed"], picture["width"]) == (
        CHECKPOINTS[0], 25, post["prompt"]["3"]["inputs"]["seed"], 96)
    assert picture["why"]["painted"] == f"on the render server {fake.url} ({CHECKPOINTS[0]})"


def test_a_daemon_night_falls_back_to_the_frame_when_comfyui_dies(tmp_path):
    with FakeComfyUI(mode="die", job_seconds=1.0) as fake:
        picture, _ = _daemon_night(tmp_path, fake)
        assert len(fake.posts("/prompt")) == 1
    assert picture["model"].endswith("models/demo") and picture["why"]["remote_fallback"] == "died"
    assert picture["why"]["painted"] == (f"on this frame, because render server {fake.url}: the server stopped "
                                         "mid-job (connection refused)")


def test_a_stopped_worker_interrupts_its_own_job_on_comfyui(open_night):
    # the job lasts until the stopped worker interrupts it, however long a loaded machine takes to stop
    with FakeComfyUI(job_seconds=60.0) as fake:
        ctx = open_night(fake.url, "comfyui")
        stop_while_on_the_server(ctx)
        render_id, outcome, _ = render_queued(ctx)
        assert outcome.status == "stopped"
        assert fake.posts("/interrupt") == [{"prompt_id": fake.prompt_ids[0]}] and fake.interrupted.is_set()
        restart_daemon(ctx)
        fake.job_seconds = 0.3
        outcome, picture_id = night.render(ctx, render_id, "now", resume=True)
    assert outcome.status == "done", outcome.error
    assert len(fake.prompt_ids) == 2 and ctx.store.count_pictures() == 1
    assert ctx.store.picture(picture_id).model == CHECKPOINTS[0]
