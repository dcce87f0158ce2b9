"""``import frame.diffusion`` and its CLI module stay cheap (the daemon and ``frame --help`` import them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_package_and_commands_loads_no_heavy_modules():
    code = ("import sys, frame.diffusion, frame.cli.render; "
            "print(sorted(m for m in ('numpy', 'PIL', 'onnx', 'requests') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"
