"""`frame demo` end to end: a whole night on the bundled model, exactly as README's first command runs it."""

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from PIL import Image


def test_demo_runs_a_whole_night_and_records_it(tmp_path):
    state = tmp_path / "state"
    result = subprocess.run([sys.executable, "-m", "frame", "demo", "--state-dir", str(state), "--steps", "3"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "paints abstract noise" in out
    shown = state / "display" / "panel.png"
    assert f"shown on the virtual panel: {shown}" in out
    panel = Image.open(shown)
    assert panel.size == (800, 480)
    with sqlite3.connect(state / "frame.db") as db:
        prompt, theme, steps, file = db.execute("SELECT prompt, theme, steps, file FROM pictures").fetchone()
    assert steps == 3 and theme and theme in prompt
    picture = state / "gallery" / file
    assert picture.is_file() and f"picture:  {picture}" in out
    assert "parameters" in Image.open(picture).info  # generation parameters travel with the PNG
    # issue 29 item 21: the summary said "MB" for the worker's peak where the log says MiB
    [peak] = re.findall(r"worker peak (\d+) MiB RSS", out)
    log = (state / "demo.log").read_text(encoding="utf-8")
    assert f"worker peak {peak} MiB" in log and " MB RSS" not in out
    # issue 40 item 21: the night's real size (672x400 for the 800x480 panel, not 256x160), and the
    # summary without ~20 lines of engine log before it: the log (the workers' lines too) is in the file
    assert Image.open(picture).size == (672, 400) and f"picture:  {picture} (672x400)" in out
    assert result.stderr.strip() == "", result.stderr
    assert "worker INFO frame.engine.model: loaded" in log and f"log:      {state / 'demo.log'}" in out


def test_demo_ends_with_the_command_that_serves_its_phone_page(tmp_path):
    """Issue 40 item 15: nothing said how to get from the demo to the phone page. The demo writes the
    configuration of its own state and ends with the one command and the page's address."""
    from frame.config import load_config

    state = tmp_path / "state"
    result = subprocess.run([sys.executable, "-m", "frame", "demo", "--state-dir", str(state), "--steps", "1"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config_path = state / "config.yaml"
    last = result.stdout.strip().splitlines()[-3:]
    assert last[0].startswith("the phone page on this demo")
    assert last[1].strip() == f"frame --config {config_path} run"
    assert last[2].strip().startswith("then open http://127.0.0.1:8080/ and log in with the token that "
                                      f"'frame --config {config_path} token' prints")
    config = load_config(str(config_path))
    assert (Path(config.state_dir), config.model.source, config.display.panel, config.web.listen, config.model.steps) \
        == (state, "demo", "virtual", "127.0.0.1:8080", 1)
    config_path.write_text(config_path.read_text() + "# mine\n")
    again = subprocess.run([sys.executable, "-m", "frame", "demo", "--state-dir", str(state), "--steps", "1"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0 and "(kept: written by an earlier demo)" in again.stdout
    assert config_path.read_text().endswith("# mine\n")  # the owner's edits are never overwritten
