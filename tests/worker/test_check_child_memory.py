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
LORA_PEAK_MIB = 80  # the loras job imports onnx to read the graphs: 59.6 MiB on x86 with the demo model
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


def test_the_loras_check_reads_the_files_and_the_graphs_within_its_cap(tmp_path):
    """Issue 40 items 8 and 10: a queued prompt's LoRAs are read (NaN/inf) and matched against the model
    in this child; the settings jobs above still import no engine."""
    from tests.lora_files import demo_lora, non_finite_lora, nowhere_lora

    (tmp_path / "loras").mkdir()
    demo_lora(tmp_path / "loras" / "good.safetensors")
    nowhere_lora(tmp_path / "loras" / "nowhere.safetensors")
    non_finite_lora(tmp_path / "loras" / "black.safetensors")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"state_dir": str(tmp_path), "model": {"source": "demo"}}))
    job = CheckJob(config=config, what="loras", cap_mb=192,
                   prompt={"texts": ["a fox <lora:good> <lora:nowhere:0.5>", "<lora:black>"]})
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(job.to_json())], capture_output=True, text=True,
                          timeout=120)
    answer = json.loads(done.stdout.strip().splitlines()[-2])
    assert answer["event"] == "done", done.stderr
    problems = [message for _, message in answer["result"]["problems"]]
    assert len(problems) == 1 and "black.safetensors" in problems[0] and "NaN or infinite" in problems[0], problems
    assert answer["result"]["lines"] == ["LoRA nowhere matched 0 layers of this model (a LoRA for another model?): "
                                         "the picture will look as without it"]
    assert answer["peak_rss_mb"] <= LORA_PEAK_MIB, answer["peak_rss_mb"]
