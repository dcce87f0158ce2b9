"""The settings page's "Estimate now" button (issue 29 item 19): ``frame estimate`` in a child, one at a
time, never beside a render, behind the owner's session and its CSRF token."""

from __future__ import annotations

import sys
import time

from frame.daemon.jobs.estimate_child import EstimateBusy, EstimateRunner
from tests.web.conftest import csrf_from


def press(owner, token: str | None = None):
    page = owner.get("/config").get_data(as_text=True)
    return owner.post("/config/estimate", data={"csrf_token": token if token is not None else csrf_from(page)})


def test_the_button_estimates_the_demo_model_in_a_child(owner, state_dir):
    before = owner.get("/config").get_data(as_text=True)
    assert "No estimate yet" in before and "Estimate now" in before
    assert "frame estimate --state-dir" not in before  # no shell command for the owner any more
    response = press(owner)
    assert response.status_code == 303 and response.headers["Location"].endswith("/config#estimate-title")
    page = owner.get("/config").get_data(as_text=True)
    assert "Estimating" in page
    deadline = time.monotonic() + 240
    while "Estimating…" in page and time.monotonic() < deadline:
        time.sleep(0.5)
        page = owner.get("/config").get_data(as_text=True)
    assert "The last estimate failed" not in page, page[page.find("estimate-title"):][:1500]
    assert "Made " in page and "by the settings page" in page
    assert "Raspberry Pi Zero 2 W:" in page and "per step:" in page
    assert not list((state_dir / "checkpoints").glob("child-estimate-*"))  # the private config is gone


def test_refused_while_a_render_runs(owner, controller, state_dir):
    controller.render = {"render_id": 1, "stage": "generating", "step": 1, "steps": 8}
    page = owner.get("/config").get_data(as_text=True)
    assert "Estimate now" not in page and "both would compete for the frame's memory" in page
    response = press(owner, csrf_from(page))
    assert response.status_code == 303
    page = owner.get("/config").get_data(as_text=True)
    assert "No estimate started: not while a render is running" in page and "Estimating…" not in page
    assert not (state_dir / "estimate.json").exists()


def test_refused_without_the_csrf_token(owner):
    assert press(owner, token="forged").status_code in (400, 403)
    assert "Estimating…" not in owner.get("/config").get_data(as_text=True)


def test_refused_without_a_login(client):
    assert client.get("/config").headers["Location"] == "/login?next=/config"
    assert client.post("/config/estimate", data={}).status_code == 401


def test_one_at_a_time_and_a_render_stops_it(tmp_path, monkeypatch):
    """A second press while the child runs is refused; a render starting stops the child."""
    from frame.config import Config
    from frame.daemon.jobs import estimate_child

    rendering = {"now": False}
    runner = EstimateRunner(lambda: rendering["now"])
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    monkeypatch.setattr(estimate_child, "estimate_command", lambda *args: sleeper)
    runner.start(Config(state_dir=str(tmp_path)), tmp_path)
    try:
        assert runner.state()["running"] is not None
        try:
            runner.start(Config(state_dir=str(tmp_path)), tmp_path)
        except EstimateBusy as exc:
            assert "already running" in str(exc)
        else:
            raise AssertionError("a second estimate started")
    finally:
        rendering["now"] = True
    deadline = time.monotonic() + 10
    while runner.state()["running"] is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert runner.state() == {"running": None, "error": "stopped: a render started, and the night has priority"}


def test_the_estimate_child_dies_with_the_daemon(tmp_path):
    """The child is ``frame estimate`` with the daemon's FRAME_PARENT_PID: a daemon that is killed or
    restarted does not leave it measuring beside the next render."""
    import os
    import signal
    import subprocess
    import textwrap

    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n", encoding="utf-8")
    log = tmp_path / "child.log"
    daemon = textwrap.dedent(f"""
        import os, subprocess, sys, time
        env = dict(os.environ, FRAME_PARENT_PID=str(os.getpid()))
        with open({str(log)!r}, "w") as log:
            child = subprocess.Popen([sys.executable, "-m", "frame", "--config", {str(config)!r}, "estimate"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=log)
        print(child.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", daemon], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while "loaded" not in log.read_text() and time.monotonic() < deadline:  # the model: now measuring
            time.sleep(0.05)
        assert "loaded" in log.read_text() and os.path.exists(f"/proc/{child}")
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()

    def alive() -> bool:
        try:
            with open(f"/proc/{child}/status") as status:
                return "State:\tZ" not in status.read()
        except OSError:
            return False

    deadline = time.monotonic() + 1.0  # its measurement alone takes seconds more
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    still = alive()
    if still:
        os.kill(child, signal.SIGKILL)
    assert not still, "the estimate child outlived the daemon"
