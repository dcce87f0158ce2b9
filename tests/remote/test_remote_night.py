"""``render.backend: remote`` wired into the night: the real render worker (under the real
supervisor, on the bundled demo model) against the fake AUTOMATIC1111 server on 127.0.0.1 — the
server's picture stored with its parameters, every fault falling back to the frame's own pipeline in
the same render, and restarts that never lose the night nor paint two pictures."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from frame.daemon.jobs import night
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.worker.records import ThemeChoice, Why
from frame.worker.remote_step import remote_budget
from tests.daemon.conftest import make_config
from tests.ports import free_port
from tests.remote.fake_a1111 import INFOTEXT, FakeA1111
from tests.remote.fake_comfyui import FakeComfyUI
from tests.remote.nights import FAST, ON_THE_FRAME, KillDuring, render_queued, restart_daemon, stop_while_on_the_server

REMOTE = {"backend": "remote"}


def _parameters(ctx, picture) -> str:
    return Image.open(gallery.picture_path(ctx.state_dir, picture.file)).info.get("parameters", "")


def _posts(fake) -> list[dict]:
    return [body for method, path, _, body in fake.requests if path == "/sdapi/v1/txt2img"]


def test_the_night_is_painted_on_the_server_with_its_parameters(open_night):
    with FakeA1111(job_seconds=1.0) as fake:
        ctx = open_night(fake.url)
        _, outcome, picture_id = render_queued(ctx)
    assert outcome.status == "done", outcome.error
    picture = ctx.store.picture(picture_id)
    [body] = _posts(fake)
    assert body["prompt"] == picture.prompt == "a lighthouse in a storm"
    assert (body["seed"], body["width"], body["height"], body["steps"]) == (picture.seed, 96, 64, 25)
    assert (picture.model, picture.steps, picture.sampler, picture.width) == (
        "dreamshaper_8", 25, "dpm++2m_karras", 96)
    assert _parameters(ctx, picture) == INFOTEXT.format(prompt=body["prompt"], negative=body["negative_prompt"],
                                                        steps=25, sampler="DPM++ 2M", schedule="Karras", cfg=7.0,
                                                        seed=body["seed"], width=96, height=64)
    assert picture.why["painted"] == f"on the render server {fake.url} (dreamshaper_8)"
    assert "remote_fallback" not in picture.why and picture.why["method"] == "queue"
    assert Image.open(gallery.picture_path(ctx.state_dir, picture.panel_file)).size == (80, 48)


def test_progress_and_preview_reach_the_live_status(open_night):
    seen, enough = [], threading.Event()

    def listen(line) -> None:
        """The server's job ends once a progress report with a step, a preview and an ETA has reached the
        status (however slowly a loaded machine starts the worker), so the test waits for no clock."""
        render = ctx.status.snapshot()["render"] or {}
        seen.append(render)
        if render.get("stage") == "generating (remote)" and (render.get("step") or 0) > 0 and render.get("preview") \
                and render.get("eta_seconds") is not None:
            enough.set()

    with FakeA1111(job_seconds=0.5, hold=enough) as fake:
        ctx = open_night(fake.url)
        ctx.status.add_listener(listen)
        _, outcome, _ = render_queued(ctx)
    assert outcome.status == "done"
    remote = [r for r in seen if r.get("stage") == "generating (remote)"]
    assert remote and all(r["steps"] == 25 for r in remote)
    assert any(r.get("preview") for r in remote) and any(r.get("eta_seconds") is not None for r in remote)
    assert remote[-1]["step"] > 0 and remote[-1]["backend_note"] == f"Painting on the render server {fake.url}."
    assert [r for r in seen if r][-1]["backend_note"].startswith(f"Painted on the render server {fake.url} in ")


FAULTS = [  # (server mode or None for nothing listening, remote settings, the reason recorded)
    pytest.param(None, {}, "refused", id="refused"),
    pytest.param("slow-body", {"job_timeout_minutes": 0.03}, "timeout", id="slow"),
    pytest.param("500", {}, "server-error", id="500"),
    pytest.param("truncated-png", {}, "bad-image", id="truncated-png"),
    pytest.param("wrong-size", {}, "wrong-size", id="wrong-size"),
    pytest.param("die", {}, "died", id="dies-mid-job"),
    pytest.param("vanish", {}, "died", id="vanishes-mid-job"),
]
COMFYUI_FAULTS = [  # the same night on render.backend: comfyui (the other faults: tests/remote/test_comfy_client.py)
    pytest.param(None, {}, "refused", id="comfyui-refused"),
    pytest.param("slow-view", {"job_timeout_minutes": 0.03}, "timeout", id="comfyui-slow"),
    pytest.param("die", {}, "died", id="comfyui-dies-mid-job"),
    pytest.param("wrong-size", {}, "wrong-size", id="comfyui-wrong-size"),
    pytest.param("huge", {}, "wrong-size", id="comfyui-hostile-size"),
]


@pytest.mark.parametrize("backend, mode, remote, reason", [pytest.param("remote", *p.values, id=p.id) for p in FAULTS]
                         + [pytest.param("comfyui", *p.values, id=p.id) for p in COMFYUI_FAULTS])
def test_each_fault_falls_back_to_the_frame_in_the_same_render(open_night, capfd, backend, mode, remote,
                                                               reason):
    if mode is None:
        ctx = open_night(f"http://127.0.0.1:{free_port()}", backend=backend, **remote)
        render_id, outcome, picture_id = render_queued(ctx)
    else:
        server = FakeComfyUI if backend == "comfyui" else FakeA1111
        with server(mode=mode, job_seconds=0.3, drip_seconds=0.3) as fake:
            ctx = open_night(fake.url, backend=backend, **remote)
            render_id, outcome, picture_id = render_queued(ctx)
        assert len(fake.posts("/prompt") if backend == "comfyui" else _posts(fake)) == 1
    assert outcome.status == "done" and outcome.restarts == 0, outcome.error
    assert ctx.store.render(render_id).status == "done" and ctx.store.count_pictures() == 1
    picture = ctx.store.picture(picture_id)
    assert picture.model.endswith("models/demo") and (picture.width, picture.steps) == (64, 2)  # local
    assert _parameters(ctx, picture).startswith("a lighthouse in a storm\n") and "dreamshaper" not in _parameters(
        ctx, picture)
    assert picture.why["remote_fallback"] == reason
    assert picture.why["painted"].startswith("on this frame, because render server")
    log = capfd.readouterr().err
    assert f"remote render failed (reason: {reason}): Render server " in log
    assert "painting tonight's picture on the frame instead." in log


def test_the_local_backend_never_asks_the_server(open_night):
    with FakeA1111() as fake:
        ctx = open_night(fake.url, backend="local")
        _, outcome, picture_id = render_queued(ctx)
    assert outcome.status == "done" and fake.requests == []
    picture = ctx.store.picture(picture_id)
    assert picture.model.endswith("models/demo") and "painted" not in picture.why


def test_a_worker_killed_mid_remote_job_asks_the_server_again(open_night):
    with FakeA1111(job_seconds=30.0) as fake:  # the first job outlasts the kill; the one asked again is quick
        ctx = open_night(fake.url)
        ctx.status.add_listener(KillDuring(ctx, 1, after_last=lambda: setattr(fake, "job_seconds", 0.3)))
        _, outcome, picture_id = render_queued(ctx)
    assert outcome.status == "done" and outcome.restarts == 1, outcome.error
    first, again = _posts(fake)
    assert first == again  # the same prompt and seed: the same picture
    assert ctx.store.count_pictures() == 1 and ctx.store.picture(picture_id).model == "dreamshaper_8"


def test_a_worker_killed_twice_mid_remote_job_paints_on_the_frame(open_night):
    with FakeA1111(job_seconds=30.0) as fake:  # both jobs outlast their kills (the frame paints the third try)
        ctx = open_night(fake.url)
        ctx.status.add_listener(KillDuring(ctx, 2))
        _, outcome, picture_id = render_queued(ctx)
    assert outcome.status == "done" and outcome.restarts == 2, outcome.error
    assert len(_posts(fake)) == 2 and ctx.store.count_pictures() == 1
    picture = ctx.store.picture(picture_id)
    assert picture.model.endswith("models/demo") and picture.why["remote_fallback"] == "died"
    assert "interrupted 2 times" in picture.why["painted"]


def test_a_stopped_worker_interrupts_the_server_and_the_restart_asks_again(open_night):
    # the job lasts until the stopped worker interrupts it, however long a loaded machine takes to stop
    with FakeA1111(job_seconds=60.0) as fake:
        ctx = open_night(fake.url)
        stop_while_on_the_server(ctx)
        render_id, outcome, _ = render_queued(ctx)
        assert outcome.status == "stopped"
        assert [p for m, p, _, _ in fake.requests if m == "POST"] == ["/sdapi/v1/txt2img", "/sdapi/v1/interrupt"]
        restart_daemon(ctx)
        fake.job_seconds = 0.3
        outcome, picture_id = night.render(ctx, render_id, "now", resume=True)
    assert outcome.status == "done", outcome.error
    assert len(_posts(fake)) == 2 and ctx.store.count_pictures() == 1
    assert ctx.store.picture(picture_id).model == "dreamshaper_8"


def test_the_server_gets_at_most_half_of_what_is_left_of_the_window(tmp_path):
    config = make_config(tmp_path)
    now = time.time()
    assert remote_budget(_job(None), config) is None  # only job_timeout_minutes then
    assert remote_budget(_job(now + 600), config, now=now) == 300
    assert remote_budget(_job(now + 7200), config, now=now) == 30 * 60  # job_timeout_minutes
    assert remote_budget(_job(now - 5), config, now=now) == 0


def test_a_worker_restarted_after_the_fallback_began_does_not_ask_again(open_night):
    """remote.json "failed" is final: the restarted worker resumes the local render, the server is
    not asked a second time (which could give a second, different picture's worth of waiting)."""
    with FakeA1111(mode="500", job_seconds=0.1) as fake:
        ctx = open_night(fake.url)
        ctx.status.add_listener(KillDuring(ctx, 1, during=ON_THE_FRAME))
        _, outcome, picture_id = render_queued(ctx)
    assert outcome.status == "done" and outcome.restarts == 1, outcome.error
    assert len(_posts(fake)) == 1 and ctx.store.count_pictures() == 1
    assert ctx.store.picture(picture_id).why["remote_fallback"] == "server-error"


def test_the_phone_page_shows_where_the_picture_is_painted(tmp_path):
    from tests.web.conftest import FakeController, logged_in, make_app, write_png

    store = Store.open(tmp_path)
    try:
        controller = FakeController()
        controller.render = {"id": 1, "kind": "night", "stage": "generating (remote)", "step": 5, "steps": 25,
                             "backend_note": "Render server http://desk:7860: not reachable (Connection refused) "
                                             "— painting tonight's picture on the frame instead."}
        write_png(tmp_path / "gallery" / "a.png", (1, 2, 3))
        picture_id = store.add_picture(file="a.png", prompt="a fox", why={
            "method": "queue", "sentence": "you queued this prompt", "remote_fallback": "refused",
            "painted": "on this frame, because render server http://desk:7860: not reachable"})
        client = logged_in(make_app(store, tmp_path, controller))
        section = client.get("/").get_data(as_text=True).split('id="progress"')[1].split("</section>")[0]
        page = client.get(f"/pictures/{picture_id}").get_data(as_text=True)
    finally:
        store.close()
    assert "not reachable (Connection refused) — painting tonight&#39;s picture on the frame instead." in section
    assert "on this frame, because render server http://desk:7860: not reachable" in page


def test_a_daemon_night_on_the_render_server_relays_progress_to_the_phone(tmp_path):
    """The real daemon (``frame run``): the taste model's choice goes to the server, the phone's
    status and page show the server's progress and preview, the picture keeps the server's parameters."""
    from tests.daemon.daemonproc import DaemonProcess, write_config

    with FakeA1111(job_seconds=4.0) as fake:
        config, url = write_config(tmp_path, display={"size": "80x48"},
                                   render={"backend": "remote", "remote": {"url": fake.url, **FAST}})
        daemon = DaemonProcess(config, url)
        try:
            daemon.post("/api/render")
            render = daemon.wait_for(lambda: (lambda r: r if r.get("preview") and r.get("step") else None)(
                daemon.get("/api/status").json().get("render") or {}), timeout=60)
            page = daemon.get("/").text
            preview = daemon.get("/render/preview")
            daemon.wait_for(lambda: daemon.get("/api/pictures").json()["total"] == 1, timeout=60)
            picture = daemon.get("/api/pictures/1").json()
        finally:
            daemon.terminate()
            daemon.kill()
    assert render["stage"] == "generating (remote)" and render["steps"] == 25
    assert render["backend_note"] == f"Painting on the render server {fake.url}."
    assert f"Painting on the render server {fake.url}." in page
    assert preview.status_code == 200 and Image.open(io.BytesIO(preview.content)).size == (16, 10)
    [body] = _posts(fake)
    assert picture["why"]["method"] != "queue" and body["prompt"] == picture["prompt"]  # the taste model's pick
    assert (picture["model"], picture["steps"], picture["seed"]) == ("dreamshaper_8", 25, body["seed"])
    assert picture["why"]["painted"] == f"on the render server {fake.url} (dreamshaper_8)"


def _step_config(tmp_path, url: str):
    from frame.config.schema import RemoteRenderConfig

    return make_config(tmp_path, render={"backend": "remote", "remote": RemoteRenderConfig(url=url, **FAST)})


def _job(deadline=None):
    from frame.worker.records import RenderJob

    return RenderJob(render_id=1, render_kind="night", state_dir=Path("/nowhere"), seed=7, deadline=deadline)


JOB = _job()
CHOICE = ThemeChoice(prompt="a fox", negative_prompt="", theme="", style="", origin="queue", why=Why("queue", ""))


def test_an_unexpected_error_in_the_remote_path_falls_back_and_is_recorded(tmp_path, monkeypatch, caplog):
    from frame.remote import render
    from frame.statefile import read_json
    from frame.worker import remote_step as nightstep

    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(render, "render_remote", broken)
    events = []
    with FakeA1111() as fake:
        painted = nightstep.paint_remotely(JOB, _step_config(tmp_path, fake.url), CHOICE, tmp_path,
                                           events.append, lambda report: None)
    assert painted is False and not (tmp_path / "image.png").exists()
    state = read_json(tmp_path / "remote.json")
    assert state["state"] == "failed" and state["reason"] == "unexpected" and "ValueError: a bug" in state["message"]
    assert "painting tonight's picture on the frame instead" in events[-1].backend_note
    assert "the remote render failed unexpectedly" in caplog.text


def test_no_request_when_the_window_has_too_little_time_left(tmp_path):
    from frame.statefile import read_json
    from frame.worker import remote_step as nightstep

    with FakeA1111() as fake:
        painted = nightstep.paint_remotely(_job(time.time() + 4), _step_config(tmp_path, fake.url),
                                           CHOICE, tmp_path, lambda event: None, lambda report: None)
    assert painted is False and fake.requests == []
    assert read_json(tmp_path / "remote.json")["reason"] == "timeout"


def test_a_slow_server_is_given_up_at_half_the_window_and_interrupted(tmp_path, monkeypatch):
    from frame.statefile import read_json
    from frame.worker import remote_step as nightstep

    monkeypatch.setattr(nightstep, "MIN_REMOTE_SECONDS", 0.5)
    with FakeA1111(job_seconds=30.0) as fake:
        started = time.time()
        painted = nightstep.paint_remotely(_job(started + 6.0), _step_config(tmp_path, fake.url),
                                           CHOICE, tmp_path, lambda event: None, lambda report: None)
        elapsed = time.time() - started
        assert fake.interrupted.is_set()
    assert painted is False and 2.9 < elapsed < 5.5  # 3 s of the 6 s left (+ the interrupt); the frame has the rest
    state = read_json(tmp_path / "remote.json")
    assert state["reason"] == "timeout" and "(the render window)" in state["message"]
