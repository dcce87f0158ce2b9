"""The render worker starts without onnx: a taste night runs the taste model in a child beside it, and on
a Pi the worker's imports are counted against the same 512 MB (the OnnxStream reader pulls onnx in, so a
module on the worker's import path may name its source type only for type checking). Painting loads
only the core op kernels: the ops no frame model has stay unimported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_render_worker_imports_no_onnx_until_it_loads_a_model():
    code = "import sys, frame.worker.render; print('onnx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr


def test_painting_sd15_and_sdxl_imports_no_optional_op():
    """The ops no frame model has (``frame.engine.ops.optional``) stay out of a render worker: painting
    the tiny SD 1.5 and SDXL pipelines and loading every exporter variant of their graphs binds core
    kernels only."""
    root = Path(__file__).resolve().parents[2]
    code = ("import glob, sys, frame.worker.render\n"
            "from frame.diffusion import load_pipeline\n"
            "from frame.engine import load_model\n"
            "for kind in ('sd15', 'sdxl'):\n"
            "    pipe = load_pipeline(f'tests/fixtures/pipelines/{kind}/model')\n"
            "    pipe.generate(pipe.settings('a lighthouse', steps=1, guidance=0, seed=3, width=32, height=32))\n"
            "for path in sorted(glob.glob('tests/fixtures/engine/*/model.onnx')):\n"
            "    load_model(path)\n"
            "print(sorted(m for m in sys.modules if m.startswith('frame.engine.ops.optional')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
