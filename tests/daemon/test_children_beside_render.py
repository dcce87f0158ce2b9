"""The Pi's memory plan (issue 27, the Pi twin): while a render worker runs, an upload is decoded under
the limits that fit beside it (``children.limits_beside_render``), and one that needs more is refused
with a sentence that says why and when to send it again; without a render the usual limits hold."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from frame.daemon.jobs import children, supervisor
from frame.daemon.jobs.children import BESIDE_RENDER, ChildFailed, limits_beside_render, run_child
from frame.worker.shortjobs import CheckJob, ImageLimits, PhotoJob

USUAL = ImageLimits(60_000_000, children.IMAGE_DECODE_BYTES, children.IMAGE_CAP_MB)


def _photo_job(tmp_path: Path) -> PhotoJob:
    return PhotoJob(out=tmp_path / "out", limits=USUAL, max_side=2048, jpeg_quality=90)


def test_only_an_upload_s_limits_shrink_and_never_grow(tmp_path):
    beside = limits_beside_render(_photo_job(tmp_path))
    assert (beside.limits.cap_mb, beside.limits.decode_bytes, beside.max_side) == (
        children.RENDER_IMAGE_CAP_MB, children.RENDER_DECODE_BYTES, children.RENDER_MAX_SIDE)
    small = PhotoJob(out=tmp_path / "o", limits=ImageLimits(1000, 1000, 48), max_side=64, jpeg_quality=90)
    assert limits_beside_render(small) == small
    check = CheckJob(config=tmp_path / "c.yaml", what="file", cap_mb=children.CHECK_CAP_MB)
    assert limits_beside_render(check) is check


def test_the_supervisor_says_which_workers_run_while_they_run(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text("import sys, time; time.sleep(1.5)\n")
    sup = supervisor.Supervisor(440, 0, command=[sys.executable, str(script), "frame.worker.render"])
    seen = []

    def watch() -> None:
        for _ in range(10):
            seen.append(children.render_running())
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    sup.run(tmp_path, stop=threading.Event())
    watcher.join()
    assert True in seen and not children.render_running()


@pytest.mark.parametrize("rendering", [False, True])
def test_a_16_megapixel_png_waits_for_the_render_to_end(tmp_path, monkeypatch, rendering):
    """64 MB of pixels: within the job's own 100 MB budget (under a roomy 256 MiB address space, so
    only the decode budget decides), over the 24 MB kept beside a render."""
    source = tmp_path / "sixteen.png"
    Image.new("RGB", (4000, 4000), (200, 30, 40)).save(source, "PNG", compress_level=1)
    monkeypatch.setattr(children, "running_workers", lambda: ["frame.worker.render"] if rendering else [])
    with open(source, "rb") as stdin:
        job = PhotoJob(out=tmp_path / "out", limits=ImageLimits(60_000_000, children.IMAGE_DECODE_BYTES, 256),
                       max_side=2048, jpeg_quality=90)
        if not rendering:
            assert run_child(job, timeout=60, stdin=stdin).width == 2048
            return
        with pytest.raises(ChildFailed) as refused:
            run_child(job, timeout=60, stdin=stdin)
    assert refused.value.refused and "at most 24 MB of pixels" in str(refused.value)
    assert str(refused.value).endswith(BESIDE_RENDER)


def test_a_phone_photo_is_still_taken_mid_render(tmp_path, monkeypatch):
    """A phone's 12-megapixel JPEG (4032x3024, 48.8 MB decoded whole) fits beside the render: stored at
    2000 px, it decodes at half scale (12.2 MB)."""
    source = tmp_path / "phone.jpg"
    Image.new("RGB", (4032, 3024), (20, 120, 40)).save(source, "JPEG", quality=80)
    monkeypatch.setattr(children, "running_workers", lambda: ["frame.worker.render"])
    with open(source, "rb") as stdin:
        result = run_child(_photo_job(tmp_path), timeout=60, stdin=stdin)
    assert (result.width, result.height) == (2000, 1500) and result.file.suffix == ".jpg"


def test_the_supervisor_says_which_stage_a_worker_is_in_while_it_runs(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text("import json, sys, time\n"
                      "print(json.dumps({'event': 'stage', 'stage': 'choosing'}), flush=True); time.sleep(1.0)\n"
                      "print(json.dumps({'event': 'stage', 'stage': 'loading model'}), flush=True); time.sleep(1.0)\n")
    sup = supervisor.Supervisor(440, 0, command=[sys.executable, str(script), "frame.worker.render"])
    seen = []

    def watch() -> None:
        for _ in range(25):
            seen.append(tuple(supervisor.running_stages()))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    sup.run(tmp_path, stop=threading.Event())
    watcher.join()
    assert ("choosing",) in seen and ("loading model",) in seen and supervisor.running_stages() == []


def test_a_check_or_upload_waits_while_the_render_chooses(tmp_path, monkeypatch):
    """The Pi twin's taste night: a settings check started beside the taste child (225 MiB) and the
    waiting worker took the cgroup over its budget and the taste child was OOM-killed. A short child
    now starts only once the render has left its choosing stage; one that waited too long is busy."""
    stages = ["choosing"]
    monkeypatch.setattr(children, "running_stages", lambda: list(stages))
    started = []
    monkeypatch.setattr(children, "_run", lambda entry, job, timeout, stdin: started.append(time.monotonic()))
    check = CheckJob(config=tmp_path / "c.yaml", what="file", cap_mb=children.CHECK_CAP_MB)
    threading.Timer(0.6, stages.clear).start()
    asked = time.monotonic()
    run_child(check, timeout=10, wait=5)
    assert started and started[0] - asked >= 0.55
    stages.append("choosing")
    with pytest.raises(children.ChildBusy, match="choosing tonight's picture"):
        run_child(check, timeout=10, wait=0.3)
    stages[:] = ["generating"]
    run_child(check, timeout=10, wait=0.3)
    assert len(started) == 2
