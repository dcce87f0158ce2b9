"""Crash-proof renders on the bundled demo model: SIGKILLed workers, a SIGTERMed and a SIGKILLed daemon."""

import os
import random
import re
import signal
import socket
import threading

import numpy as np
import pytest
from PIL import Image

from frame.daemon.jobs import night
from frame.daemon.store.database import Store
from frame.statefile import read_json, write_json
from tests.daemon.conftest import make_config
from tests.daemon.daemonproc import DaemonProcess, write_config

STEPS = 12


def _ctx(tmp_path, name):
    state = tmp_path / name
    config = make_config(state, model={"size": "64x64", "steps": STEPS}, display={"size": "80x48"},
                         worker={"max_restarts": 12})
    return night.RenderContext(config, Store.open(state), state)


def _same_job(source_ctx, target_ctx, render_id):
    """Give the target render exactly the source's job (seed, choice), as a restart would see it."""
    folder = night.ensure_job(target_ctx, render_id, "now")
    job = read_json(night.job_dir(source_ctx.state_dir, render_id) / "job.json")
    write_json(folder / "job.json", {**job, "state_dir": str(target_ctx.state_dir)})


class Killer:
    """SIGKILLs the worker at planned points: after a given finished step, or some seconds after a
    worker starts (model loading, decoding). Records the first step each restarted worker reports."""

    def __init__(self, ctx, plan):
        self.ctx, self.plan, self.kills, self.first_steps = ctx, list(plan), 0, []
        self._seen_pid = None

    def on_status(self, line):
        supervisor = self.ctx.supervisor
        pid = supervisor.pid if supervisor else None
        match = re.search(r"step (\d+)/", line)
        if pid is None or match is None:
            return
        step = int(match[1])
        if pid != self._seen_pid:
            self._seen_pid = pid
            self.first_steps.append(step)
            if self.plan and self.plan[0][0] == "time":
                threading.Timer(self.plan.pop(0)[1], self._kill, args=(pid,)).start()
                return
        # ">=": a resumed worker may already be past the planned step (timing varies under load)
        if self.plan and self.plan[0][0] == "step" and step >= self.plan[0][1]:
            self.plan.pop(0)
            self._kill(pid)

    def _kill(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
            self.kills += 1
        except ProcessLookupError:
            pass


def test_sigkilled_worker_still_produces_the_identical_picture(tmp_path):
    calm, chaos = _ctx(tmp_path, "calm"), _ctx(tmp_path, "chaos")
    try:
        render_id = calm.store.start_render("now", None)
        night.ensure_job(calm, render_id, "now")
        assert chaos.store.start_render("now", None) == render_id
        _same_job(calm, chaos, render_id)

        outcome, calm_picture = night.render(calm, render_id, "now", resume=True)
        assert outcome.status == "done" and outcome.restarts == 0

        rng = random.Random(7)
        steps = sorted(rng.sample(range(2, STEPS), 4))
        plan = [("step", steps[0]), ("time", 0.3), ("step", steps[1]), ("step", steps[2]), ("step", steps[3]),
                ("time", 0.05)]
        killer = Killer(chaos, plan)
        chaos.status.add_listener(killer.on_status)
        outcome, chaos_picture = night.render(chaos, render_id, "now", resume=True)
        assert outcome.status == "done", outcome.error
        assert killer.kills >= 5 and outcome.restarts >= 5
        assert any(step > 1 for step in killer.first_steps[1:]), killer.first_steps  # resumed mid-way

        def pixels(ctx, picture_id, column):
            name = getattr(ctx.store.picture(picture_id), column)
            return np.asarray(Image.open(ctx.state_dir / "gallery" / name))

        for column in ("file", "panel_file"):
            assert np.array_equal(pixels(calm, calm_picture, column), pixels(chaos, chaos_picture, column))
        assert chaos.store.render(render_id).restarts == outcome.restarts
    finally:
        calm.store.close()
        chaos.store.close()


@pytest.fixture
def daemon_config(tmp_path):
    return write_config(tmp_path, model={"size": "64x64", "steps": 10}, display={"size": "80x48"})


def _render_step(daemon):
    render = daemon.get("/api/status").json().get("render") or {}
    return render.get("step") if "unet" in (render.get("stage") or "") else None


def test_daemon_stopped_or_killed_mid_render_resumes(tmp_path, daemon_config):
    config, url = daemon_config
    state = tmp_path / "state"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify.sock"))
    notify.settimeout(0.5)
    statuses = []

    def listen():  # like systemd: read every notification as it comes
        while notify.fileno() >= 0:
            try:
                statuses.append(notify.recv(4096).decode())
            except TimeoutError:
                continue
            except OSError:
                return

    threading.Thread(target=listen, daemon=True).start()
    daemon = DaemonProcess(config, url, env={"NOTIFY_SOCKET": str(tmp_path / "notify.sock")})
    try:
        render_id = daemon.post("/api/render").json()["render_id"]
        daemon.wait_for(lambda: (_render_step(daemon) or 0) >= 2)
        code, seconds = daemon.terminate()
        assert code == 0 and seconds < 10  # SIGTERM mid-render: worker stopped, clean exit
    finally:
        daemon.kill()
    notify.close()
    assert any(re.search(r"STATUS=rendering: generating \(unet\) step \d+/10", m) for m in statuses), statuses
    assert list((state / "checkpoints" / f"render-{render_id}" / "diffusion").iterdir())

    def resumes_logged() -> int:
        return len(re.findall(r"denoising with .* from step", (tmp_path / "config.log").read_text()))

    daemon = DaemonProcess(config, url)
    try:
        # wait for this run's own worker: the live status kept from the stopped run may already say
        # step 5+ (a fast machine gets far before SIGTERM lands), and then kill it as soon as it resumed
        daemon.wait_for(lambda: resumes_logged() >= 2, timeout=60)
        worker = daemon.get("/api/status").json()["render"]
        daemon.proc.kill()  # SIGKILL: no cleanup at all; the worker dies with it (PDEATHSIG)
        daemon.proc.wait()
    finally:
        daemon.kill()
    assert worker["id"] == render_id

    daemon = DaemonProcess(config, url)
    try:
        daemon.wait_for(lambda: daemon.get("/api/pictures").json()["total"] == 1, timeout=90)
        status = daemon.wait_for(lambda: (lambda s: s if s["shown"] else None)(daemon.get("/api/status").json()))
        assert status["shown"]["picture_id"] == 1
    finally:
        daemon.terminate()
        daemon.kill()
    log = (tmp_path / "config.log").read_text()
    resumed_from = [int(n) for n in re.findall(r"denoising with .* from step (\d+)", log)]
    # every start after the first resumes from a checkpoint; the third start is there unless the SIGKILLed
    # worker had already finished its last steps (a fast machine, few steps left after the SIGTERM)
    assert resumed_from[0] == 0 and all(n > 0 for n in resumed_from[1:]) and 2 <= len(resumed_from) <= 3, resumed_from
    store = Store.open(state)
    try:
        assert store.render(render_id).status == "done" and store.count_pictures() == 1
    finally:
        store.close()
