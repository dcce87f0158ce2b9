"""The render worker starts without onnx: a taste night runs the taste model in a child beside it, and on
a Pi the worker's imports are counted against the same 512 MB (the OnnxStream reader pulls onnx in, so a
module on the worker's import path may name its source type only for type checking)."""

from __future__ import annotations

import subprocess
import sys


def test_the_render_worker_imports_no_onnx_until_it_loads_a_model():
    code = "import sys, frame.worker.render; print('onnx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr
