"""benchmarks/choose_new_texts.py projects choose on the Pi from the count alone.

The script is how docs/benchmarks-nights.md's and docs/estimate.md's `choose` figures are made; after the Pi
projection became machine-independent it still handed this machine's measured rates to
``pi.pi_throughput`` (which takes step signatures) and failed before printing anything."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from frame.models import resolve_model_source

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "choose_new_texts.py"


def load_script():
    spec = importlib.util.spec_from_file_location("choose_new_texts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pi_choose_figures_come_from_the_count_and_repeat():
    script = load_script()
    encoder = str(Path(resolve_model_source("demo")) / "text_encoder" / "model.onnx")
    runs = {"padded": script.choose_run(encoder, 10, 77), "short": script.choose_run(encoder, 10, 12)}
    location = str(Path(encoder).parent / "model.onnx")
    first = script.projection(runs, 0.2, location)
    second = script.projection(runs, 0.2, location)
    pi = [[re.search(r"Raspberry Pi Zero 2 W (.+)$", line).group(1) for line in lines] for lines in (first, second)]
    assert pi[0] == pi[1]  # the Pi figure is the count at the constants, not this machine's measurement
    assert len(first) == 2 and all("this machine (CPU time)" in line for line in first)
    assert "1 passes of 10 at 12 positions" in first[1]
