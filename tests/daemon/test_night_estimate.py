"""The nightly step fit runs in the real daemon (issue 28 item 1).

``frame run`` with the real supervisor and render worker on the demo model: the night's estimate child
ran (the daemon's ``FRAME_PARENT_PID`` was once read as a setting, so every night logged "no step
estimate ... parent_pid: unknown key" and rendered the configured steps unchecked), chose the step
count the picture was rendered with, and the settings page and ``frame config check`` show it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from frame.statefile import read_json
from tests.daemon.conftest import clock
from tests.daemon.daemonproc import ROOT, DaemonProcess, write_config

STEPS = 12  # the demo model's minimum here is 10 (frame.estimate.choice): an hour's window fits all 12


def test_a_scheduled_night_runs_the_step_estimate_and_renders_its_choice(tmp_path):
    config, url = write_config(tmp_path, model={"size": "64x64", "steps": STEPS},
                               schedule={"timezone": "UTC", "render_at": clock(-30), "deadline": clock(60),
                                         "show_at": clock(59)})
    daemon = DaemonProcess(config, url)  # the missed night is caught up at start, with its deadline
    try:
        daemon.wait_for(lambda: daemon.get("/api/pictures").json()["total"] == 1, timeout=240)
        picture = daemon.get("/api/pictures/1").json()
        page = daemon.get("/config", timeout=60).text  # re-validates the file: slow on a busy machine
    finally:
        daemon.terminate()
        daemon.kill()
    log = (tmp_path / "config.log").read_text()
    assert "no step estimate" not in log, log
    assert f"frame.worker.render: steps: all {STEPS} steps: about" in log, log
    # the guidance passes follow the demo UNet's own counted memory, not the full-size SD 1.5 figures
    assert re.search(r"guidance passes: shared \(weights read once per step: about 1\d\d MB of the worker's "
                     r"440 MB \(counted for this model\)\)", log), log
    saved = read_json(tmp_path / "state" / "estimate.json")
    choice = saved["step_choice"]
    assert saved["origin"] == "tonight's render" and choice["steps"] == STEPS and choice["fits"], choice
    assert picture["steps"] == STEPS, picture
    assert f"Tonight: all {STEPS} steps: about" in page and "No estimate yet" not in page

    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAME_PARENT_PID": str(os.getpid())}
    check = subprocess.run([sys.executable, "-m", "frame", "--config", str(config), "config", "check"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert "last nightly estimate (tonight's render, " in check.stdout
    assert f"all {STEPS} steps: about" in check.stdout, check.stdout
