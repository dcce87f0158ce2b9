"""`frame demo` end to end: a whole night on the bundled model, exactly as README's first command runs it."""

import re
import sqlite3
import subprocess
import sys

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
    assert f"worker peak {peak} MiB" in result.stderr and " MB RSS" not in out
