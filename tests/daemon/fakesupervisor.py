"""An in-process stand-in for Supervisor, for daemon logic tests that do not need a real model: render
jobs 'succeed' with small PNGs, or end as told (failed / deadline); show jobs succeed."""

from __future__ import annotations

import threading
from pathlib import Path

from PIL import Image

from frame.daemon.jobs.supervisor import Outcome
from frame.worker.events import PictureMeta, ProgressEvent, RenderOutput, ShowOutput
from frame.worker.records import read_job


class FakeSupervisor:
    render_status = "done"
    runs: list[str] = []

    def __init__(self, memory_limit_mb, max_restarts, *, on_event=None, on_restart=None, **kwargs):
        self.on_event = on_event or (lambda e: None)

    def run(self, job_dir: Path, *, stop: threading.Event, deadline=None) -> Outcome:
        job = read_job(job_dir)
        FakeSupervisor.runs.append(job.kind)
        if job.kind == "show":
            return Outcome("done", result=ShowOutput("shown", shown=str(job_dir / "panel-shown.png")))
        self.on_event(ProgressEvent(stage="generating", step=1, steps=2, fraction=0.5))
        if self.render_status != "done":
            return Outcome(self.render_status, error="told to fail", step="generate")
        image, panel = job_dir / "image.png", job_dir / "panel.png"
        Image.new("RGB", (8, 8), (200, 10, 10)).save(image)
        Image.new("RGB", (8, 8), (10, 10, 200)).save(panel)
        meta = PictureMeta(prompt=(job.choice or job.candidates[0]).prompt, seed=job.seed, negative_prompt="",
                           theme="t", style="s", origin="test", sampler=None, steps=None, guidance=None, width=None,
                           height=None, model=None, why=None)
        return Outcome("done", result=RenderOutput(image=image, panel=panel, meta=meta,
                                                   prompt_id=job.choice.prompt_id if job.choice else None))
