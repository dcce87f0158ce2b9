"""The settings checks' child reads the model's facts without loading its graph (issue 27, the Pi
twin): it may run beside the render worker when the owner saves settings mid-render. It imported
numpy, onnx and Pillow and parsed the UNet's nodes to learn one input's shape: 61 MiB (x86, demo
model); now 35 MiB (numpy stays: the step rule builds the sampler's schedule)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from frame.worker.shortjobs import CheckJob

PEAK_MIB = 48
PROBE = ("import sys; from frame.worker.checkchild import main; rc = main(sys.argv[1:]); "
         "print(sorted({'onnx', 'PIL'} & set(sys.modules)))")


@pytest.mark.parametrize("what", ["config", "prompt", "file"])
def test_the_check_child_answers_without_onnx_or_pillow(tmp_path, what):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"state_dir": str(tmp_path), "model": {"source": "demo", "steps": 8}}))
    prompt = {"steps": 4, "width": 250, "height": 256} if what == "prompt" else None
    job = CheckJob(config=config, what=what, cap_mb=192, prompt=prompt)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(job.to_json())], capture_output=True, text=True,
                          timeout=120)
    answer_line, modules = done.stdout.strip().splitlines()[-2:]
    answer = json.loads(answer_line)
    assert answer["event"] == "done", done.stderr
    assert modules == "[]"
    assert answer["peak_rss_mb"] <= PEAK_MIB
    if what == "prompt":  # the model's facts were read: its size rule, and a width off the 16 px grid refused
        assert answer["result"]["size_rule"] == "multiples of 16 px for this SD 1.5 model"
        assert [p[0] for p in answer["result"]["problems"]] == [["size"]], answer
